//! What the run measured: each contender's turns, round by round.

use std::time::Duration;

use crate::contender::Contender;
use crate::phases::Phase;

/// One contender's turn in one round.
#[derive(Clone, Debug)]
pub(crate) struct Turn {
    /// The round, from 0.
    pub(crate) round: usize,
    pub(crate) hold: Duration,
    pub(crate) parents: usize,
    pub(crate) phases: Vec<Phase>,
    /// Parents with the children the last phase run asks for, listed from
    /// the API server at the end.
    pub(crate) right: usize,
    pub(crate) reconciles: u64,
    /// The gate's figures (concord only): held then ran, held then
    /// requeued, seconds waited.
    pub(crate) held: Option<(u64, u64, f64)>,
}

/// What the run measured: every contender's turns, in round order.
pub(crate) struct Outcome {
    pub(crate) turns: Vec<(Contender, Vec<Turn>)>,
    pub(crate) per_round: usize,
}
