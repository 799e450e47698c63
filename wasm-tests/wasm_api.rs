//! The JavaScript surface, run in Node and in headless Chromium: results arrive
//! as plain JS objects and failures as JS `Error`s carrying the engine's message.
#![cfg(target_arch = "wasm32")]

#[path = "../native-tests/common/mod.rs"]
mod common;

use js_sys::{Array, Error as JsErrorObject, Reflect};
use lamina::wasm::{model_info, JsStreamLoader};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_test::wasm_bindgen_test as test;

fn get(v: &JsValue, key: &str) -> JsValue {
    Reflect::get(v, &JsValue::from_str(key)).unwrap()
}

/// The JS `Error` a failed call throws, with its message.
fn thrown_message(e: wasm_bindgen::JsError) -> String {
    let value: JsValue = e.into();
    let error: &JsErrorObject = value
        .dyn_ref()
        .expect("failures are thrown as JS Error objects");
    error.message().into()
}

#[test]
fn model_info_returns_a_js_object() {
    let bytes = common::random_model(3).write();
    let info = model_info(&bytes).unwrap();
    let spec = common::random_model(3);
    assert_eq!(get(&info, "version").as_f64(), Some(spec.version as f64));
    let tensors: Array = get(&info, "tensors").dyn_into().unwrap();
    assert_eq!(tensors.length() as usize, spec.tensors.len());
    for (i, (name, ty, shape, data)) in spec.tensors.iter().enumerate() {
        let t = tensors.get(i as u32);
        assert_eq!(get(&t, "name").as_string().unwrap(), *name);
        assert_eq!(get(&t, "type").as_string().unwrap(), ty.name());
        let js_shape: Array = get(&t, "shape").dyn_into().unwrap();
        let js_shape: Vec<u64> = js_shape
            .iter()
            .map(|d| d.as_f64().unwrap() as u64)
            .collect();
        assert_eq!(&js_shape, shape);
        assert_eq!(get(&t, "bytes").as_f64().unwrap() as usize, data.len());
    }
}

#[test]
fn bad_bytes_throw_an_error_with_the_message() {
    let e = model_info(b"PK\x03\x04 a zip file").unwrap_err();
    assert_eq!(
        thrown_message(e),
        "not a GGUF file: starts with 50 4b 03 04"
    );
    let e = model_info(b"GGUF\x07\x00\x00\x00").unwrap_err();
    assert_eq!(
        thrown_message(e),
        "unsupported GGUF version 7: only versions 2 and 3 are supported"
    );
}

#[test]
fn stream_loader_class() {
    let bytes = common::random_model(11).write();
    let mut loader = JsStreamLoader::new(bytes.len() as f64).unwrap();
    for chunk in bytes.chunks(7) {
        loader.push(chunk).unwrap();
    }
    assert!(loader.header_ready());
    assert_eq!(loader.received() as usize, bytes.len());
    let info = loader.finish().unwrap();
    let tensors: Array = get(&info, "tensors").dyn_into().unwrap();
    assert_eq!(
        tensors.length() as usize,
        common::random_model(11).tensors.len()
    );
    let e = loader.finish().unwrap_err();
    assert_eq!(thrown_message(e), "the stream loader has already finished");

    let e = JsStreamLoader::new(-1.0).err().unwrap();
    assert!(thrown_message(e).contains("totalBytes"));
    let mut loader = JsStreamLoader::new(64.0).unwrap();
    let e = loader.push(b"\x7fELF").unwrap_err();
    assert_eq!(
        thrown_message(e),
        "not a GGUF file: starts with 7f 45 4c 46"
    );
}
