//! CRD schemas in the terms the API server checks.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// String formats kube-apiserver v1.37 validates (go-openapi's names,
/// without dashes, plus Kubernetes' own).
const STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "k8s-short-name",
    "k8s-long-name",
];

/// Rewrites every schema of `crd` so that the API server enforces what it
/// says and warns about nothing: a format it does not know is dropped, and
/// the range a Rust integer format implied is kept as `minimum`/`maximum`
/// (`format: uint32` becomes `minimum: 0`, `maximum: 4294967295`).
///
/// schemars describes `u32` as `format: uint32`, which the API server
/// ignores with a warning when the CRD is created; the bound it implies
/// is then only checked by whoever decodes the object.
/// [`Webhooks::with_crd_conversion`](super::Webhooks::with_crd_conversion)
/// applies it; call it on any other CRD generated from Rust types.
///
/// ```no_run
/// # fn demo(crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition) {
/// let crd = concord::webhook::kubernetes_formats(crd);
/// # let _ = crd;
/// # }
/// ```
#[must_use]
pub fn kubernetes_formats(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            rewrite(schema);
        }
    }
    crd
}

fn rewrite(schema: &mut JSONSchemaProps) {
    if let Some(format) = schema.format.take() {
        schema.format = keep(schema, format);
    }
    let children = schema
        .properties
        .iter_mut()
        .flat_map(|p| p.values_mut())
        .chain(
            schema
                .pattern_properties
                .iter_mut()
                .flat_map(|p| p.values_mut()),
        )
        .chain(schema.definitions.iter_mut().flat_map(|p| p.values_mut()))
        .chain(schema.all_of.iter_mut().flatten())
        .chain(schema.any_of.iter_mut().flatten())
        .chain(schema.one_of.iter_mut().flatten())
        .chain(schema.not.as_deref_mut());
    let mut nested: Vec<&mut JSONSchemaProps> = children.collect();
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(item)) => nested.push(item),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => nested.extend(items.iter_mut()),
        None => {}
    }
    for props in [
        schema.additional_properties.as_mut(),
        schema.additional_items.as_mut(),
    ]
    .into_iter()
    .flatten()
    {
        if let JSONSchemaPropsOrBool::Schema(inner) = props {
            nested.push(inner);
        }
    }
    for child in nested {
        rewrite(child);
    }
}

/// The format to keep, `None` to drop it; the bound a dropped integer
/// format implied moves to `minimum`/`maximum`.
fn keep(schema: &mut JSONSchemaProps, format: String) -> Option<String> {
    match schema.type_.as_deref() {
        Some("integer") => {
            if format == "int32" || format == "int64" {
                return Some(format);
            }
            let range: Option<(f64, f64)> = match format.as_str() {
                "uint8" => Some((0.0, f64::from(u8::MAX))),
                "uint16" => Some((0.0, f64::from(u16::MAX))),
                "uint32" => Some((0.0, f64::from(u32::MAX))),
                "int8" => Some((f64::from(i8::MIN), f64::from(i8::MAX))),
                "int16" => Some((f64::from(i16::MIN), f64::from(i16::MAX))),
                // No exact f64 for u64::MAX: the lower bound alone.
                "uint64" | "uint" | "uint128" => Some((0.0, f64::INFINITY)),
                _ => None,
            };
            if let Some((low, high)) = range {
                let minimum = schema.minimum.map_or(low, |m| m.max(low));
                schema.minimum = Some(minimum);
                if high.is_finite() {
                    schema.maximum = Some(schema.maximum.map_or(high, |m| m.min(high)));
                }
            }
            None
        }
        Some("number") => (format == "float" || format == "double").then_some(format),
        _ => STRING_FORMATS
            .contains(&format.replace('-', "").as_str())
            .then_some(format),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(properties: serde_json::Value) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Thing", "plural": "things"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": properties}}}]}
        }))
        .unwrap()
    }

    fn schema(crd: &CustomResourceDefinition) -> serde_json::Value {
        serde_json::to_value(&crd.spec.versions[0].schema).unwrap()["openAPIV3Schema"].clone()
    }

    #[test]
    fn unsigned_formats_become_bounds_kubernetes_checks() {
        let out = kubernetes_formats(crd(json!({
            "count": {"type": "integer", "format": "uint32", "minimum": 0.0, "maximum": 20.0},
            "small": {"type": "integer", "format": "uint8"},
            "big": {"type": "integer", "format": "uint64"},
            "items": {"type": "array", "items": {"type": "integer", "format": "uint16"}},
        })));
        let s = schema(&out);
        assert_eq!(
            s["properties"]["count"],
            json!({"type": "integer", "minimum": 0.0, "maximum": 20.0})
        );
        assert_eq!(
            s["properties"]["small"],
            json!({"type": "integer", "minimum": 0.0, "maximum": 255.0})
        );
        assert_eq!(
            s["properties"]["big"],
            json!({"type": "integer", "minimum": 0.0})
        );
        assert_eq!(
            s["properties"]["items"]["items"],
            json!({"type": "integer", "minimum": 0.0, "maximum": 65535.0})
        );
    }

    #[test]
    fn known_formats_stay_and_unknown_ones_go() {
        let out = kubernetes_formats(crd(json!({
            "n": {"type": "integer", "format": "int32"},
            "x": {"type": "number", "format": "double"},
            "f": {"type": "number", "format": "float32"},
            "t": {"type": "string", "format": "date-time"},
            "u": {"type": "string", "format": "semver"},
        })));
        let s = schema(&out);
        assert_eq!(s["properties"]["n"]["format"], "int32");
        assert_eq!(s["properties"]["x"]["format"], "double");
        assert_eq!(s["properties"]["f"].get("format"), None);
        assert_eq!(s["properties"]["t"]["format"], "date-time");
        assert_eq!(s["properties"]["u"].get("format"), None);
    }
}
