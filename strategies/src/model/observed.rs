use serde_json::Value;

/// The object a write starts from, as JSON: usually a copy from a watch
/// cache, converted once from the caller's type.
///
/// `complete` says whether the JSON holds every field the API server
/// stores. A [`DynamicObject`](kube::core::DynamicObject) does; a typed
/// object may not (a CRD whose Rust type lags its schema, a built-in field
/// newer than `k8s-openapi`), so a strategy that sends the whole object
/// (`update`) reads it afresh first rather than drop the fields it lacks.
///
/// ```
/// use concord_strategies::Observed;
/// let pod = serde_json::json!({"metadata": {"name": "web-0"}});
/// assert!(!Observed::typed(pod).is_complete());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    json: Value,
    complete: bool,
}

impl Observed {
    /// JSON holding every stored field (from a `DynamicObject` or a raw read).
    pub fn complete(json: Value) -> Self {
        Observed {
            json,
            complete: true,
        }
    }

    /// JSON serialised from a typed object, which may lack stored fields.
    pub fn typed(json: Value) -> Self {
        Observed {
            json,
            complete: false,
        }
    }

    /// The object.
    pub fn json(&self) -> &Value {
        &self.json
    }

    /// Whether the JSON holds every stored field.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    pub(crate) fn into_json(self) -> Value {
        self.json
    }
}

/// `metadata.<field>` of an object as a string.
pub(crate) fn meta<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}
