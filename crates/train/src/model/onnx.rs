//! ONNX export of the linear models: a standard graph of the default domain (opset 13) that
//! onnxruntime and other runtimes read, encoded with prost from the message definitions of
//! onnx.proto below (the subset the graph uses, with onnx.proto's field numbers).
//!
//! The graph, for input `X` (float32, N x d):
//! - the model's scaling, as it applies it: `(X - offset) * factor` (Sub, Mul);
//! - `scores = X W^T + b` (MatMul, Add): N for a binary model (one hyperplane), N x K
//!   otherwise (one row per class, joint or one-vs-rest);
//! - `label`: the class at sgn(score) (`score >= 0`: the second class, sgn(0) = +1) for a
//!   binary model, else at the first highest score (ArgMax, as `Model::predict`), gathered
//!   from the class names in their type: for labels that came typed (from Python) int64
//!   (uint64 past int64's range, strings past uint64's), double, bool or string as the
//!   labels were; for a command line's text labels int64 when every name is an integer, else
//!   strings.
//!
//! Voted and kernel models have no such graph (many weight vectors voting, support vectors
//! and a kernel): they are refused.

use prost::Message;

use super::{Body, Model};
use crate::data::LabelType;
use crate::{Error, Result};

/// onnx.proto's messages, the fields the export writes.
mod proto {
    /// `ModelProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ModelProto {
        #[prost(int64, tag = "1")]
        pub ir_version: i64,
        #[prost(string, tag = "2")]
        pub producer_name: String,
        #[prost(string, tag = "3")]
        pub producer_version: String,
        #[prost(string, tag = "6")]
        pub doc_string: String,
        #[prost(message, optional, tag = "7")]
        pub graph: Option<GraphProto>,
        #[prost(message, repeated, tag = "8")]
        pub opset_import: Vec<OperatorSetIdProto>,
        #[prost(message, repeated, tag = "14")]
        pub metadata_props: Vec<StringStringEntryProto>,
    }

    /// `OperatorSetIdProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct OperatorSetIdProto {
        #[prost(string, tag = "1")]
        pub domain: String,
        #[prost(int64, tag = "2")]
        pub version: i64,
    }

    /// `StringStringEntryProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct StringStringEntryProto {
        #[prost(string, tag = "1")]
        pub key: String,
        #[prost(string, tag = "2")]
        pub value: String,
    }

    /// `GraphProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GraphProto {
        #[prost(message, repeated, tag = "1")]
        pub node: Vec<NodeProto>,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(message, repeated, tag = "5")]
        pub initializer: Vec<TensorProto>,
        #[prost(message, repeated, tag = "11")]
        pub input: Vec<ValueInfoProto>,
        #[prost(message, repeated, tag = "12")]
        pub output: Vec<ValueInfoProto>,
    }

    /// `NodeProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct NodeProto {
        #[prost(string, repeated, tag = "1")]
        pub input: Vec<String>,
        #[prost(string, repeated, tag = "2")]
        pub output: Vec<String>,
        #[prost(string, tag = "3")]
        pub name: String,
        #[prost(string, tag = "4")]
        pub op_type: String,
        #[prost(message, repeated, tag = "5")]
        pub attribute: Vec<AttributeProto>,
    }

    /// `AttributeProto` (INT attributes only).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct AttributeProto {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(int64, tag = "3")]
        pub i: i64,
        /// `AttributeType`: 2 is INT.
        #[prost(int32, tag = "20")]
        pub r#type: i32,
    }

    /// `TensorProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorProto {
        #[prost(int64, repeated, tag = "1")]
        pub dims: Vec<i64>,
        /// `TensorProto.DataType`: 1 FLOAT, 7 INT64, 8 STRING, 9 BOOL, 11 DOUBLE, 13 UINT64.
        #[prost(int32, tag = "2")]
        pub data_type: i32,
        #[prost(float, repeated, tag = "4")]
        pub float_data: Vec<f32>,
        /// BOOL values (and other types of 32 bits or fewer).
        #[prost(int32, repeated, tag = "5")]
        pub int32_data: Vec<i32>,
        #[prost(bytes = "vec", repeated, tag = "6")]
        pub string_data: Vec<Vec<u8>>,
        #[prost(int64, repeated, tag = "7")]
        pub int64_data: Vec<i64>,
        #[prost(string, tag = "8")]
        pub name: String,
        #[prost(double, repeated, tag = "10")]
        pub double_data: Vec<f64>,
        #[prost(uint64, repeated, tag = "11")]
        pub uint64_data: Vec<u64>,
    }

    /// `ValueInfoProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueInfoProto {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "2")]
        pub r#type: Option<TypeProto>,
    }

    /// `TypeProto` (tensors only: its `tensor_type` of the `value` oneof).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TypeProto {
        #[prost(message, optional, tag = "1")]
        pub tensor_type: Option<TensorType>,
    }

    /// `TypeProto.Tensor`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorType {
        #[prost(int32, tag = "1")]
        pub elem_type: i32,
        #[prost(message, optional, tag = "2")]
        pub shape: Option<TensorShapeProto>,
    }

    /// `TensorShapeProto`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorShapeProto {
        #[prost(message, repeated, tag = "1")]
        pub dim: Vec<Dimension>,
    }

    /// `TensorShapeProto.Dimension`: a size or a symbolic name (the `value` oneof).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dimension {
        #[prost(oneof = "DimValue", tags = "1, 2")]
        pub value: Option<DimValue>,
    }

    /// The `value` oneof of `Dimension`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum DimValue {
        #[prost(int64, tag = "1")]
        DimValue(i64),
        #[prost(string, tag = "2")]
        DimParam(String),
    }
}

use proto::*;

const FLOAT: i32 = 1;
const INT64: i32 = 7;
const STRING: i32 = 8;
const BOOL: i32 = 9;
const DOUBLE: i32 = 11;
const UINT64: i32 = 13;
/// The opset of the default domain the graph uses (ArgMax's select_last_index and
/// GreaterOrEqual are from 12).
pub const OPSET: i64 = 13;
/// The IR version written (opset 13 needs 7; onnxruntime reads up to 10).
const IR_VERSION: i64 = 7;

fn node(op: &str, inputs: &[&str], output: &str, attrs: &[(&str, i64)]) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.to_string()],
        name: output.to_string(),
        op_type: op.to_string(),
        attribute: attrs
            .iter()
            .map(|(n, v)| AttributeProto {
                name: n.to_string(),
                i: *v,
                r#type: 2,
            })
            .collect(),
    }
}

fn floats(name: &str, dims: &[usize], data: Vec<f32>) -> TensorProto {
    TensorProto {
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: FLOAT,
        float_data: data,
        name: name.to_string(),
        ..Default::default()
    }
}

fn value(name: &str, elem: i32, dims: &[Option<usize>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => DimValue::DimValue(*v as i64),
                None => DimValue::DimParam("N".to_string()),
            }),
        })
        .collect();
    ValueInfoProto {
        name: name.to_string(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorType {
                elem_type: elem,
                shape: Some(TensorShapeProto { dim }),
            }),
        }),
    }
}

/// The class names as a tensor of their type (`ty`, when they came typed): int64 (uint64
/// past its range), double, bool or strings; untyped names: int64 when every name is an
/// integer written as Rust writes it (so "1" but not "01" or "1.0"), else strings.
fn class_tensor(classes: &[String], ty: Option<LabelType>) -> (TensorProto, i32) {
    let ints: Option<Vec<i64>> = classes
        .iter()
        .map(|c| {
            let v = c.parse::<i64>().ok()?;
            (ty == Some(LabelType::Int) || v.to_string() == *c).then_some(v)
        })
        .collect();
    let mut t = TensorProto {
        dims: vec![classes.len() as i64],
        name: "classes".to_string(),
        ..Default::default()
    };
    let parsed = |f: fn(&str) -> bool| classes.iter().all(|c| f(c));
    t.data_type = match (ty, ints) {
        (Some(LabelType::Int) | None, Some(v)) => {
            t.int64_data = v;
            INT64
        }
        (Some(LabelType::Int), None) if parsed(|c| c.parse::<u64>().is_ok()) => {
            t.uint64_data = classes.iter().filter_map(|c| c.parse().ok()).collect();
            UINT64
        }
        (Some(LabelType::Float), _) if parsed(|c| c.parse::<f64>().is_ok()) => {
            t.double_data = classes.iter().filter_map(|c| c.parse().ok()).collect();
            DOUBLE
        }
        (Some(LabelType::Bool), _) => {
            t.int32_data = classes.iter().map(|c| i32::from(c == "True")).collect();
            BOOL
        }
        _ => {
            t.string_data = classes.iter().map(|c| c.as_bytes().to_vec()).collect();
            STRING
        }
    };
    let dt = t.data_type;
    (t, dt)
}

/// The model as an ONNX graph (see the module's documentation): input `X`, outputs `label`
/// and `scores`. Voted and kernel models are an error.
pub fn to_onnx(model: &Model) -> Result<Vec<u8>> {
    let d = model.n_features();
    let refuse = |what: &str| Error::Model {
        path: "<model>".into(),
        msg: format!(
            "a {what} model has no ONNX form here (ONNX export covers the linear models: \
             binary, multiclass, one-vs-rest, averaged, pocket, Winnow, passive-aggressive)"
        ),
    };
    // Weight rows (K x d, row-major) and biases; binary: one row.
    let (w, b, binary): (Vec<f32>, Vec<f32>, bool) = match model.body() {
        Body::Binary(h) => (h.weights.clone(), vec![h.bias], true),
        Body::Multiclass(r) | Body::Ovr(r) => (r.weights.concat(), r.bias.clone(), false),
        Body::Voted(_) => return Err(refuse("voted")),
        Body::Kernel(_) => return Err(refuse("kernel")),
    };
    let k = b.len();
    let mut init = Vec::new();
    let mut nodes = Vec::new();
    let mut x = "X".to_string();
    if let Some(s) = model.scaling() {
        init.push(floats("scale_offset", &[d], s.offset.clone()));
        init.push(floats("scale_factor", &[d], s.factor.clone()));
        nodes.push(node("Sub", &["X", "scale_offset"], "centred", &[]));
        nodes.push(node("Mul", &["centred", "scale_factor"], "scaled", &[]));
        x = "scaled".to_string();
    }
    // W^T: d x K (binary: d, so that MatMul gives N scores).
    let mut wt = vec![0f32; d * k];
    for c in 0..k {
        for j in 0..d {
            wt[j * k + c] = w[c * d + j];
        }
    }
    let (class_t, label_type) = class_tensor(model.classes(), model.label_type());
    init.push(class_t);
    if binary {
        init.push(floats("coef", &[d], wt));
        init.push(floats("intercept", &[], b));
        init.push(floats("zero", &[], vec![0.0]));
        nodes.push(node("MatMul", &[&x, "coef"], "product", &[]));
        nodes.push(node("Add", &["product", "intercept"], "scores", &[]));
        nodes.push(node("GreaterOrEqual", &["scores", "zero"], "positive", &[]));
        nodes.push(node(
            "Cast",
            &["positive"],
            "label_index",
            &[("to", INT64 as i64)],
        ));
    } else {
        init.push(floats("coef", &[d, k], wt));
        init.push(floats("intercept", &[k], b));
        nodes.push(node("MatMul", &[&x, "coef"], "product", &[]));
        nodes.push(node("Add", &["product", "intercept"], "scores", &[]));
        nodes.push(node(
            "ArgMax",
            &["scores"],
            "label_index",
            &[("axis", 1), ("keepdims", 0), ("select_last_index", 0)],
        ));
    }
    nodes.push(node(
        "Gather",
        &["classes", "label_index"],
        "label",
        &[("axis", 0)],
    ));
    let scores_dims: Vec<Option<usize>> = if binary {
        vec![None]
    } else {
        vec![None, Some(k)]
    };
    let graph = GraphProto {
        node: nodes,
        name: format!("rosenblatt_{}", model.kind().name()),
        initializer: init,
        input: vec![value("X", FLOAT, &[None, Some(d)])],
        output: vec![
            value("label", label_type, &[None]),
            value("scores", FLOAT, &scores_dims),
        ],
    };
    let m = ModelProto {
        ir_version: IR_VERSION,
        producer_name: "rosenblatt".to_string(),
        producer_version: env!("CARGO_PKG_VERSION").to_string(),
        doc_string: format!(
            "{} perceptron ({}), {d} features, classes {}",
            model.algorithm().name(),
            model.kind().name(),
            model.classes().join(", ")
        ),
        graph: Some(graph),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: OPSET,
        }],
        metadata_props: vec![StringStringEntryProto {
            key: "classes".to_string(),
            value: serde_json::to_string(model.classes()).unwrap_or_default(),
        }],
    };
    Ok(m.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_are_int64_only_when_they_read_back_the_same() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(class_tensor(&s(&["-1", "1"]), None).1, INT64);
        assert_eq!(class_tensor(&s(&["0", "01"]), None).1, STRING);
        assert_eq!(class_tensor(&s(&["1.0", "2.0"]), None).1, STRING);
        assert_eq!(class_tensor(&s(&["cat", "dog"]), None).1, STRING);
        // Typed labels keep their type.
        let t = |c: &[&str], ty| class_tensor(&s(c), Some(ty)).1;
        assert_eq!(t(&["0.0", "1.5"], LabelType::Float), DOUBLE);
        assert_eq!(t(&["False", "True"], LabelType::Bool), BOOL);
        assert_eq!(t(&["1", "2"], LabelType::Str), STRING);
        assert_eq!(t(&["1", "2"], LabelType::Int), INT64);
        let big = ["9223372036854775807", "18446744073709551615"];
        assert_eq!(t(&big, LabelType::Int), UINT64);
        assert_eq!(t(&["-1", "18446744073709551615"], LabelType::Int), STRING);
    }

    #[test]
    fn the_encoding_round_trips_through_prost() {
        let t = floats("w", &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let back = TensorProto::decode(t.encode_to_vec().as_slice()).unwrap();
        assert_eq!(back, t);
    }
}
