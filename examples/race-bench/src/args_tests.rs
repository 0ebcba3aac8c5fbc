//! The command line's unit tests: defaults, lists and contenders.

use super::*;

#[test]
fn argo_runs_json_index_by_default() {
    let args = Args::try_parse_from(["race-bench", "--scenario", "argo"]).unwrap();
    assert_eq!(args.contenders().last(), Some(&Contender::JsonIndex));
    assert_eq!(args.pods, 10_000);
    assert_eq!(args.stopping(), Stopping::Fixed(5));
    assert_eq!(args.race, RaceMode::Lockstep);
}

#[test]
fn a_baseline_asks_for_rounds_until_decided() {
    let args = Args::try_parse_from(["race-bench", "--baseline", "lax"]).unwrap();
    assert_eq!(
        args.stopping(),
        Stopping::UntilDecided {
            max_rounds: 20,
            max_time: None
        }
    );
    let args = Args::try_parse_from([
        "race-bench",
        "--baseline",
        "lax",
        "--max-rounds",
        "8",
        "--max-minutes",
        "0.5",
    ])
    .unwrap();
    assert_eq!(
        args.stopping(),
        Stopping::UntilDecided {
            max_rounds: 8,
            max_time: Some(std::time::Duration::from_secs(30))
        }
    );
    let args = Args::try_parse_from(["race-bench", "--baseline", "lax", "--rounds", "3"]).unwrap();
    assert_eq!(args.stopping(), Stopping::Fixed(3));
    let args = Args::try_parse_from(["race-bench", "--until-decided"]).unwrap();
    assert!(matches!(args.stopping(), Stopping::UntilDecided { .. }));
}

#[test]
fn a_fixed_count_refuses_the_sequential_flags() {
    for flags in [
        ["--rounds", "3", "--until-decided", ""],
        ["--rounds", "3", "--max-rounds", "8"],
        ["--rounds", "3", "--max-minutes", "5"],
    ] {
        let argv = std::iter::once("race-bench").chain(flags.into_iter().filter(|f| !f.is_empty()));
        assert!(Args::try_parse_from(argv).is_err(), "{flags:?}");
    }
    assert!(Args::try_parse_from(["race-bench", "--max-rounds", "2"]).is_err());
    assert!(Args::try_parse_from(["race-bench", "--max-minutes", "0"]).is_err());
}

#[test]
fn intensity_outside_zero_to_one_is_refused() {
    assert!(Args::try_parse_from(["race-bench", "--race-intensity", "1.5"]).is_err());
    assert!(Args::try_parse_from(["race-bench", "--race-intensity", "x"]).is_err());
    let args = Args::try_parse_from(["race-bench", "--race-intensity", "0.3"]).unwrap();
    assert!((args.race_intensity - 0.3).abs() < 1e-12);
}

#[test]
fn the_ungated_manager_runs_only_when_named() {
    let args = Args::try_parse_from(["race-bench"]).unwrap();
    assert!(
        !args
            .contenders()
            .contains(&Contender::ManagerGuardedUngated)
    );
    let args = Args::try_parse_from([
        "race-bench",
        "--strategies",
        "manager-guarded,manager-guarded-ungated",
    ])
    .unwrap();
    let [gated, ungated] = args.contenders()[..] else {
        panic!("two contenders: {:?}", args.contenders());
    };
    assert_eq!(ungated.as_str(), "manager-guarded-ungated");
    assert_eq!(gated.manager_strategy(), ungated.manager_strategy());
    assert!(gated.read_your_writes() && !ungated.read_your_writes());
}

#[test]
fn strategies_parse_as_a_comma_list() {
    let args =
        Args::try_parse_from(["race-bench", "--strategies", "lax,raw,json-index,lax"]).unwrap();
    assert_eq!(
        args.contenders(),
        [Contender::Lax, Contender::Raw, Contender::JsonIndex]
    );
}

#[test]
fn the_baseline_is_lax_when_it_runs() {
    let args = Args::try_parse_from(["race-bench"]).unwrap();
    assert_eq!(args.baseline(), Some(Contender::Lax));
    let args = Args::try_parse_from(["race-bench", "--strategies", "strict,raw"]).unwrap();
    assert_eq!(args.baseline(), None);
    let args = Args::try_parse_from(["race-bench", "--baseline", "raw"]).unwrap();
    assert_eq!(args.baseline(), Some(Contender::Raw));
    assert!(args.out_dir().ends_with("race-bench/kueue"));
}
