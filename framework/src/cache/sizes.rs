//! `concord_cache_objects` and `concord_cache_json_bytes`: how many objects
//! each shared cache holds and their size as JSON, the collector the
//! manager registers for its caches.

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use super::Caches;
use super::size::Size;

/// The objects of every shared cache of a manager, read from the stores
/// at each scrape: a length per cache, and the JSON size of its objects
/// (the scrape encodes every cached object into a counter, keeping none of
/// it).
#[derive(Debug)]
pub(crate) struct CacheSizes(pub(crate) Arc<Caches>);

impl Collector for CacheSizes {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let sizes = self.0.sizes();
        per_cache(
            &mut encoder,
            "concord_cache_objects",
            "Objects held by each shared watch cache, by resource, namespaces watched (empty: all), Rust type held and selector.",
            &sizes,
            |size| gauge(size.objects),
        )?;
        per_cache(
            &mut encoder,
            "concord_cache_json_bytes",
            "The objects of each shared watch cache encoded as compact JSON, in bytes, at the scrape (their size on the wire, not in memory, which is several times larger), by the labels of concord_cache_objects.",
            &sizes,
            |size| gauge(size.json_bytes),
        )?;
        per_cache(
            &mut encoder,
            "concord_cache_decodes",
            "Copies a compact shared cache decoded for its readers (0 for a decoded cache), by the labels of concord_cache_objects.",
            &sizes,
            |size| ConstCounter::new(size.decoding.0),
        )?;
        per_cache(
            &mut encoder,
            "concord_cache_decode_seconds",
            "Seconds a compact shared cache spent decoding copies for its readers, by the labels of concord_cache_objects.",
            &sizes,
            |size| ConstCounter::new(size.decoding.1),
        )
    }
}

/// A count as a gauge's value (saturating).
fn gauge(count: impl TryInto<i64>) -> ConstGauge<i64> {
    ConstGauge::new(count.try_into().unwrap_or(i64::MAX))
}

/// One metric family, with `sample` of each cache under its labels.
fn per_cache<M: EncodeMetric + TypedMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    sizes: &[Size],
    sample: impl Fn(&Size) -> M,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, M::TYPE)?;
    for size in sizes {
        sample(size).encode(family.encode_family(&size.labels())?)?;
    }
    Ok(())
}
