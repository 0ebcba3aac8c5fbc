//! What the API server does with a `shardSelector` (KEP-5866), probed on
//! the embedded v1.37.2: how the parameter is passed, which hash it ranges
//! over, and what a server without the `ShardedListAndWatch` gate answers.
//!
//! ```text
//! cargo test -p concord-tests --test sharding server_selectors::
//! ```

use std::collections::BTreeSet;

use anyhow::Result;
use concord_testenv::{ControlPlane, ControlPlaneOptions, TestEnv};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::{Client, Config};

/// FNV-1a, 64 bits, over `bytes`: what the server's ranges are over.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn bound(value: u128) -> String {
    if value == 1 << 64 {
        "0x10000000000000000".into()
    } else {
        format!("0x{value:016x}")
    }
}

/// `GET path?shardSelector=<selector>` (URL-encoded): status and body.
async fn list_raw(client: &Client, path: &str, selector: &str) -> Result<(u16, String)> {
    let encoded: String = url_encode(selector);
    let uri = format!("{path}?shardSelector={encoded}");
    let request = http::Request::get(uri).body(Vec::new())?;
    let response = client.send(request.map(Into::into)).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect_bytes().await?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The (name, uid) pairs of a ConfigMapList body.
fn names_and_uids(body: &str) -> BTreeSet<(String, String)> {
    let list: serde_json::Value = serde_json::from_str(body).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["metadata"]["name"].as_str().unwrap().to_owned(),
                item["metadata"]["uid"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn create_maps(api: &Api<ConfigMap>, n: usize) -> Result<BTreeSet<(String, String)>> {
    let mut made = BTreeSet::new();
    for i in 0..n {
        let map: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("probe-{i}")},
        }))?;
        let created = api.create(&PostParams::default(), &map).await?;
        made.insert((
            created.metadata.name.unwrap(),
            created.metadata.uid.unwrap(),
        ));
    }
    Ok(made)
}

fn range(field: &str, from: u128, to: u128) -> String {
    format!("shardRange({field}, '{}', '{}')", bound(from), bound(to))
}

// ANCHOR: probe
#[tokio::test]
async fn a_gated_server_ranges_over_fnv1a_of_the_uid_string() -> Result<()> {
    let env = TestEnv::shared()?;
    let namespace = env.namespace().await?;
    let client = env.client()?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace.name());
    let made = create_maps(&api, 40).await?;
    let path = format!("/api/v1/namespaces/{}/configmaps", namespace.name());
    // Four quarters of the hash space: each answers exactly the objects
    // whose FNV-1a 64 of the uid's text falls in it, and together all.
    let quarter: u128 = 1 << 62;
    let mut seen = BTreeSet::new();
    for q in 0..4u128 {
        let (from, to) = (q * quarter, (q + 1) * quarter);
        let (status, body) =
            list_raw(&client, &path, &range("object.metadata.uid", from, to)).await?;
        assert_eq!(status, 200, "{body}");
        // A server that serves the selector says so in the list's metadata.
        let list: serde_json::Value = serde_json::from_str(&body)?;
        assert!(
            list["metadata"]["shardInfo"]["selector"].is_string(),
            "{body}"
        );
        let served = names_and_uids(&body);
        let expected: BTreeSet<_> = made
            .iter()
            .filter(|(_, uid)| {
                let h = u128::from(fnv1a64(uid.as_bytes()));
                from <= h && h < to
            })
            .cloned()
            .collect();
        // The namespace's kube-root-ca.crt map is in some quarter too.
        let ours: BTreeSet<_> = served
            .iter()
            .filter(|(name, _)| name.starts_with("probe-"))
            .cloned()
            .collect();
        assert_eq!(ours, expected, "quarter {q}");
        seen.extend(served);
    }
    seen.retain(|(name, _)| name.starts_with("probe-"));
    assert_eq!(seen, made, "every object in exactly one quarter");
    Ok(())
}
// ANCHOR_END: probe

/// The hash bucket (of 128) of `h`.
fn bucket(h: u64) -> u128 {
    u128::from(h >> 57)
}

#[tokio::test]
async fn a_gated_server_takes_ranges_joined_by_or_and_namespaces() -> Result<()> {
    let env = TestEnv::shared()?;
    let namespace = env.namespace().await?;
    let client = env.client()?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace.name());
    let made = create_maps(&api, 40).await?;
    let path = format!("/api/v1/namespaces/{}/configmaps", namespace.name());
    // The 64 even buckets of 128, as 64 ranges joined by `||`: exactly
    // the objects hashed into an even bucket.
    let width: u128 = 1 << 57;
    let even: Vec<String> = (0..64u128)
        .map(|b| range("object.metadata.uid", 2 * b * width, (2 * b + 1) * width))
        .collect();
    let (status, body) = list_raw(&client, &path, &even.join(" || ")).await?;
    assert_eq!(status, 200, "{body}");
    let mut served = names_and_uids(&body);
    served.retain(|(name, _)| name.starts_with("probe-"));
    let expected: BTreeSet<_> = made
        .iter()
        .filter(|(_, uid)| bucket(fnv1a64(uid.as_bytes())).is_multiple_of(2))
        .cloned()
        .collect();
    assert_eq!(served, expected);
    // By namespace: all or nothing, by FNV-1a of the namespace's name.
    let h = u128::from(fnv1a64(namespace.name().as_bytes()));
    let holding = range("object.metadata.namespace", h, h + 1);
    let (status, body) = list_raw(&client, &path, &holding).await?;
    assert_eq!(
        (status, names_and_uids(&body).len() >= made.len()),
        (200, true),
        "{body}"
    );
    let missing = range("object.metadata.namespace", h + 1, 1 << 64);
    let (status, body) = list_raw(&client, &path, &missing).await?;
    assert_eq!((status, names_and_uids(&body).len()), (200, 0), "{body}");
    // Refusals: a short bound and a field that is not offered answer 500.
    let (status, body) = list_raw(
        &client,
        &path,
        "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
    )
    .await?;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("16-digit hex"), "{body}");
    let (status, body) =
        list_raw(&client, &path, &range("object.metadata.name", 0, 1 << 63)).await?;
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("supported: object.metadata.uid, object.metadata.namespace"),
        "{body}"
    );
    Ok(())
}

#[tokio::test]
async fn a_server_without_the_gate_answers_a_shard_selector() -> Result<()> {
    let control_plane =
        ControlPlane::start(ControlPlaneOptions::default().without_controller_manager())?;
    let kubeconfig = kube::config::Kubeconfig::read_from(control_plane.kubeconfig_path())?;
    let config =
        Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
            .await?;
    let client = Client::try_from(config)?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    create_maps(&api, 4).await?;
    let (status, body) = list_raw(
        &client,
        "/api/v1/namespaces/default/configmaps",
        &range("object.metadata.uid", 0, 1 << 63),
    )
    .await?;
    // Ignored: every object, and no `shardInfo` saying it was applied.
    assert_eq!(status, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body)?;
    assert!(list["metadata"].get("shardInfo").is_none(), "{body}");
    let mut served = names_and_uids(&body);
    served.retain(|(name, _)| name.starts_with("probe-"));
    assert_eq!(served.len(), 4, "{body}");
    Ok(())
}
