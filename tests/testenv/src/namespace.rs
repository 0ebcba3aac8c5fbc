use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::core::ObjectMeta;

use crate::Error;
use crate::poll::poll;

/// A namespace of its own for one test, with an admin client.
///
/// # Caveats
///
/// The namespace is not deleted when the test ends: with the embedded control
/// plane everything disappears with the process; on an existing cluster
/// delete the `concord.dev/test=true` namespaces yourself.
#[derive(Clone)]
pub struct TestNamespace {
    name: String,
    client: Client,
}

impl std::fmt::Debug for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestNamespace")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl TestNamespace {
    pub(crate) async fn create(client: Client) -> Result<Self, Error> {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let name = format!("concord-test-{}", suffix());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some([("concord.dev/test".to_owned(), "true".to_owned())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(|e| Error::api(format!("creating namespace {name}"), e))?;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
        poll(
            &format!("the default ServiceAccount of {name}"),
            Duration::from_secs(60),
            || async {
                match accounts.get_opt("default").await {
                    Ok(found) => Ok(found.is_some()),
                    Err(e) => Err(Error::api(
                        format!("reading ServiceAccount {name}/default"),
                        e,
                    )),
                }
            },
        )
        .await?;
        Ok(TestNamespace { name, client })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// An admin client (a clone; clients are cheap to clone).
    pub fn client(&self) -> Client {
        self.client.clone()
    }
}

/// A short name suffix unique within this process and unlikely to repeat
/// across processes.
pub(crate) fn suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:x}{:x}{n}", std::process::id() % 0xfff, nanos % 0xfffff)
}
