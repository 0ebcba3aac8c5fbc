//! Lost writes, counted by checking every final object against what the
//! scenario says it must be.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

use crate::scenarios::{Spec, index};

/// Objects listed per page, to bound memory.
const PAGE: u32 = 500;

/// What the check found.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// Broken invariants: an expected finalizer or label missing, an
    /// unexpected finalizer left behind, an object gone.
    pub(crate) lost_writes: u64,
    /// Pods that still carry finalizers, to strip before deletion.
    pub(crate) with_finalizers: Vec<String>,
}

/// Read every pod of `api` from the server (not from a cache) and count the
/// invariants of `specs` they break.
///
/// # Errors
///
/// When listing fails.
pub(crate) async fn check(api: &Api<Pod>, specs: &[Spec]) -> anyhow::Result<Verdict> {
    let mut verdict = Verdict::default();
    let mut seen = vec![false; specs.len()];
    let mut params = ListParams::default().limit(PAGE);
    // One page per PAGE pods, plus the last one.
    for _ in 0..=specs.len() / PAGE as usize + 1 {
        let page = api.list(&params).await?;
        for pod in &page.items {
            let Some(name) = pod.metadata.name.as_deref() else {
                continue;
            };
            if pod
                .metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| !f.is_empty())
            {
                verdict.with_finalizers.push(name.to_owned());
            }
            let Some(i) = index(name) else { continue };
            let (Some(spec), Some(slot)) = (specs.get(i as usize), seen.get_mut(i as usize)) else {
                continue;
            };
            *slot = true;
            verdict.lost_writes += broken(pod, spec);
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    for (spec, seen) in specs.iter().zip(&seen) {
        if !seen {
            verdict.lost_writes +=
                1 + (spec.final_finalizers.len() + spec.final_labels.len()) as u64;
        }
    }
    Ok(verdict)
}

/// How many of `spec`'s final-state invariants `pod` breaks.
fn broken(pod: &Pod, spec: &Spec) -> u64 {
    let finalizers = pod.metadata.finalizers.as_deref().unwrap_or_default();
    let missing = spec
        .final_finalizers
        .iter()
        .filter(|want| finalizers.iter().filter(|f| f == *want).count() != 1)
        .count();
    let unexpected = finalizers
        .iter()
        .filter(|f| !spec.final_finalizers.contains(&f.as_str()))
        .count();
    let labels = pod.metadata.labels.as_ref();
    let wrong_labels = spec
        .final_labels
        .iter()
        .filter(|(k, v)| labels.and_then(|l| l.get(k)) != Some(v))
        .count();
    (missing + unexpected + wrong_labels) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::ObjectMeta;

    fn pod(finalizers: &[&str], labels: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                finalizers: Some(finalizers.iter().map(|f| (*f).to_owned()).collect()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn a_dropped_foreign_finalizer_is_one_lost_write() {
        let spec = Spec {
            final_finalizers: vec!["foreign"],
            ..Spec::default()
        };
        assert_eq!(broken(&pod(&[], &[]), &spec), 1);
        assert_eq!(broken(&pod(&["foreign"], &[]), &spec), 0);
        assert_eq!(broken(&pod(&["ours", "foreign"], &[]), &spec), 1);
    }

    #[test]
    fn a_missing_label_is_one_lost_write() {
        let spec = Spec {
            final_labels: vec![("done".into(), "true".into())],
            ..Spec::default()
        };
        assert_eq!(broken(&pod(&[], &[("done", "false")]), &spec), 1);
        assert_eq!(broken(&pod(&[], &[("done", "true")]), &spec), 0);
    }
}
