//! The deploy objects of a project `init` has just made: no kinds yet, the
//! RBAC its `--print-rbac` prints under concord's default strategy table,
//! so that `generate` right after `init` changes nothing.

use concord::{ManagerArgs, featuregates::FeatureRegistry, rbac::Permissions};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::bundle::Bundle;
use crate::Error;
use crate::project::Project;

/// The bundle of a project without kinds, with configuration `config`.
pub(crate) fn initial(project: &Project, config: &str) -> Result<Bundle, Error> {
    let name = &project.project_name;
    let table = ManagerArgs::new()
        .load_config(FeatureRegistry::new())
        .map_err(Error::Config)?;
    let role = Permissions::new(table.strategies())
        .events()
        .leader_election()
        .role(name, &project.namespace);
    let cluster_role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        rules: Some(
            Permissions::new(table.strategies())
                .secure_metrics()
                .rules(),
        ),
        ..ClusterRole::default()
    };
    let reader = concord::rbac::metrics_reader(&format!("{name}-metrics-reader"));
    Bundle::new(name, &project.namespace)
        .with_config(config)
        .with_rbac(role)?
        .with_rbac(cluster_role)?
        .with_rbac(reader)
}
