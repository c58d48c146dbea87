use super::*;
use serde_json::json;

/// A safetensors file's bytes: `header` as the JSON, then `data` zero bytes.
pub(crate) fn raw(header: &str, data: u64) -> Vec<u8> {
    let mut out = u64::try_from(header.len()).unwrap().to_le_bytes().to_vec();
    out.extend(header.as_bytes());
    out.resize(out.len() + usize::try_from(data).unwrap(), 0);
    out
}

/// A safetensors file holding `tensors` (name, dtype, shape) end to end, their data zeros.
pub(crate) fn file(tensors: &[(&str, &str, &[u64])]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), json!({"format": "pt"}));
    let mut at = 0u64;
    for &(name, dtype, shape) in tensors {
        let elements: u64 = shape.iter().product();
        let bytes = (elements * dtype_bits(dtype).unwrap_or(8)).div_ceil(8);
        header.insert(
            name.into(),
            json!({"dtype": dtype, "shape": shape, "data_offsets": [at, at + bytes]}),
        );
        at += bytes;
    }
    raw(&Value::Object(header).to_string(), at)
}

/// Writes `files` into `snapshot` (`<repo>/snapshots/<rev>`) as the Hub cache does: each a
/// link to `../../blobs/<blob>`.
pub(crate) fn write_linked(snapshot: &Path, files: &[(&str, &[u8])]) {
    let blobs = snapshot.join("../../blobs");
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(snapshot).unwrap();
    for (i, (name, bytes)) in files.iter().enumerate() {
        let blob = format!("{i:040x}");
        std::fs::write(blobs.join(&blob), bytes).unwrap();
        link(&Path::new("../../blobs").join(blob), &snapshot.join(name));
    }
}

#[cfg(unix)]
fn link(target: &Path, at: &Path) {
    std::os::unix::fs::symlink(target, at).unwrap();
}

#[cfg(not(unix))]
fn link(target: &Path, at: &Path) {
    std::fs::copy(at.parent().unwrap().join(target), at).unwrap();
}

fn index(map: &[(&str, &str)]) -> Vec<u8> {
    let map: serde_json::Map<String, Value> =
        map.iter().map(|(t, f)| (t.to_string(), json!(f))).collect();
    json!({"metadata": {"total_size": 0}, "weight_map": map})
        .to_string()
        .into_bytes()
}

fn snapshot_dir(root: &Path) -> PathBuf {
    root.join("models--org--model/snapshots/0123456789abcdef")
}

/// Writes `bytes` as `name` in a fresh folder and reads it.
fn read_written(bytes: &[u8]) -> (tempfile::TempDir, Result<Header, SafetensorsError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.safetensors");
    std::fs::write(&path, bytes).unwrap();
    let read = read_file(&path);
    (dir, read)
}

/// Reading `bytes` from a file fails, naming the file, with a problem `is` accepts; read from
/// memory it fails too (or, when only the file's length shows the fault, passes
/// `check_file_len`'s test instead).
fn fails(bytes: &[u8], is: impl Fn(&Problem) -> bool) -> String {
    let (_dir, read) = read_written(bytes);
    let err = read.unwrap_err();
    assert!(is(&err.problem), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("bad.safetensors"), "{text}");
    let memory = read_header(bytes).and_then(|h| h.check_file_len(bytes.len() as u64));
    assert!(memory.is_err(), "{memory:?}");
    text
}

#[test]
fn bf16_tensors_are_counted_by_dtype() {
    let bytes = file(&[
        ("model.embed_tokens.weight", "BF16", &[1000, 64]),
        ("model.layers.0.self_attn.q_proj.weight", "BF16", &[64, 64]),
        ("model.norm.weight", "F32", &[64]),
        ("lm_head.weight", "BF16", &[1000, 64]),
    ]);
    let header = read_header(bytes.as_slice()).unwrap();
    assert_eq!(header.metadata["format"], "pt");
    assert_eq!(header.tensors["model.norm.weight"].shape, vec![64]);
    header.check_file_len(bytes.len() as u64).unwrap();
    let w = header.weights();
    let bf16 = 1000 * 64 * 2 + 64 * 64;
    assert_eq!((w.files, w.tensors), (1, 4));
    assert_eq!(w.elements_by_dtype["BF16"], bf16);
    assert_eq!(w.bytes_by_dtype["BF16"], bf16 * 2);
    assert_eq!(w.bytes_by_dtype["F32"], 64 * 4);
    assert_eq!(w.bytes, bf16 * 2 + 64 * 4);
    assert_eq!(w.parameters, bf16 + 64);
    assert!(!w.packed.any());
}

#[test]
fn a_bitsandbytes_4bit_layer_counts_two_parameters_a_byte() {
    let w = "model.layers.0.mlp.down_proj.weight";
    let name = |s: &str| format!("{w}{s}");
    let (absmax, qmap, nested, nested_map, state) = (
        name(".absmax"),
        name(".quant_map"),
        name(".nested_absmax"),
        name(".nested_quant_map"),
        name(".quant_state.bitsandbytes__nf4"),
    );
    let bytes = file(&[
        (w, "U8", &[2048, 1]),
        (&absmax, "U8", &[64]),
        (&qmap, "F32", &[16]),
        (&nested, "F32", &[1]),
        (&nested_map, "F32", &[256]),
        (&state, "U8", &[120]),
        ("model.layers.0.input_layernorm.weight", "BF16", &[64]),
        // a U8 weight without a quant state is not packed
        ("model.layers.0.plain.weight", "U8", &[10]),
    ]);
    let wd = read_header(bytes.as_slice()).unwrap().weights();
    let nf4 = &wd.packed.bnb_nf4;
    assert_eq!((nf4.tensors, nf4.bytes, nf4.parameters), (1, 2048, 4096));
    assert_eq!(nf4.aux_tensors, 5);
    assert_eq!(nf4.aux_bytes, 64 + 64 + 4 + 1024 + 120);
    assert_eq!(wd.parameters, 4096 + 64 + 10);
    assert_eq!(wd.packed.bnb_fp4, Packed::default());

    let state = name(".quant_state.bitsandbytes__fp4");
    let bytes = file(&[
        (w, "U8", &[8, 1]),
        (&absmax, "F32", &[1]),
        (&qmap, "F32", &[16]),
        (&state, "U8", &[100]),
    ]);
    let wd = read_header(bytes.as_slice()).unwrap().weights();
    assert_eq!(wd.packed.bnb_fp4.parameters, 16);
    assert_eq!(wd.packed.bnb_nf4, Packed::default());
    assert_eq!(wd.parameters, 16);
}

#[test]
fn an_fp8_layer_with_its_scales() {
    let bytes = file(&[
        ("l.q_proj.weight", "F8_E4M3", &[32, 16]),
        ("l.q_proj.weight_scale_inv", "F32", &[1, 1]),
        ("l.k_proj.weight", "F8_E4M3", &[8, 16]),
        ("l.k_proj.weight_scale", "F32", &[]),
        ("l.k_proj.input_scale", "F32", &[]),
        // no scale: an FP8 tensor, not a scaled weight
        ("l.o_proj.weight", "F8_E4M3", &[4, 4]),
        ("l.norm.weight", "BF16", &[16]),
    ]);
    let w = read_header(bytes.as_slice()).unwrap().weights();
    let fp8 = &w.packed.fp8;
    assert_eq!((fp8.tensors, fp8.bytes, fp8.parameters), (2, 640, 640));
    assert_eq!((fp8.aux_tensors, fp8.aux_bytes), (3, 12));
    assert_eq!(w.parameters, 640 + 16 + 16);
    assert_eq!(w.elements_by_dtype["F8_E4M3"], 656);
}

#[test]
fn an_mxfp4_block_and_scale_pair() {
    let blocks = "model.layers.0.mlp.experts.gate_up_proj_blocks";
    let scales = "model.layers.0.mlp.experts.gate_up_proj_scales";
    let bytes = file(&[
        (blocks, "U8", &[2, 8, 3, 16]),
        (scales, "U8", &[2, 8, 3]),
        (
            "model.layers.0.mlp.experts.gate_up_proj_bias",
            "BF16",
            &[2, 8],
        ),
    ]);
    let w = read_header(bytes.as_slice()).unwrap().weights();
    let mx = &w.packed.mxfp4;
    assert_eq!((mx.tensors, mx.bytes, mx.parameters), (1, 768, 1536));
    assert_eq!((mx.aux_tensors, mx.aux_bytes), (1, 48));
    assert_eq!(w.parameters, 1536 + 16);
    assert_eq!(w.bytes, 768 + 48 + 32);
}

#[test]
fn an_index_with_two_linked_shards() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot_dir(dir.path());
    let (a, b) = (
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    );
    // the packed weight in one shard, its quant state in the other
    let one = file(&[
        ("embed.weight", "BF16", &[100, 8]),
        ("q.weight", "U8", &[32, 1]),
    ]);
    let two = file(&[
        ("q.weight.absmax", "F32", &[1]),
        ("q.weight.quant_map", "F32", &[16]),
        ("q.weight.quant_state.bitsandbytes__nf4", "U8", &[50]),
        ("norm.weight", "BF16", &[8]),
    ]);
    let idx = index(&[
        ("embed.weight", a),
        ("q.weight", a),
        ("q.weight.absmax", b),
        ("q.weight.quant_map", b),
        ("q.weight.quant_state.bitsandbytes__nf4", b),
        ("norm.weight", b),
    ]);
    write_linked(
        &snap,
        &[(a, &one), (b, &two), ("model.safetensors.index.json", &idx)],
    );
    let w = read_snapshot(&snap).unwrap().unwrap();
    assert_eq!((w.files, w.tensors), (2, 6));
    assert_eq!(w.packed.bnb_nf4.parameters, 64);
    assert_eq!(w.parameters, 800 + 64 + 8);
    assert_eq!(w.bytes_by_dtype["BF16"], 1600 + 16);
    assert_eq!(w.bytes, 1616 + 32 + 4 + 64 + 50);

    // a single file wins over an index, as transformers reads them
    write_linked(
        &dir.path().join("models--org--other/snapshots/rev"),
        &[
            ("model.safetensors", &file(&[("x", "BF16", &[3])])),
            ("model.safetensors.index.json", b"not json"),
        ],
    );
    let single = read_snapshot(&dir.path().join("models--org--other/snapshots/rev"))
        .unwrap()
        .unwrap();
    assert_eq!((single.files, single.bytes), (1, 6));
}

#[test]
fn a_snapshot_without_safetensors_is_none() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    std::fs::write(dir.path().join("pytorch_model.bin"), "").unwrap();
    assert_eq!(read_snapshot(dir.path()), Ok(None));
}

#[test]
fn a_shard_missing_from_the_index_names_the_index_and_the_shard() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot_dir(dir.path());
    let a = "model-00001-of-00002.safetensors";
    let idx = index(&[("x", a), ("y", "model-00002-of-00002.safetensors")]);
    write_linked(
        &snap,
        &[
            (a, &file(&[("x", "BF16", &[1])])),
            ("model.safetensors.index.json", &idx),
        ],
    );
    let err = read_snapshot(&snap).unwrap_err();
    assert!(
        matches!(err.problem, Problem::MissingShard { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("model.safetensors.index.json"), "{text}");
    assert!(text.contains("model-00002-of-00002.safetensors"), "{text}");
}

/// The first bytes of `bytes`: its length and header, as a Hub fetch keeps them.
fn header_only(bytes: &[u8]) -> Vec<u8> {
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    bytes[..8 + usize::try_from(len).unwrap()].to_vec()
}

#[test]
fn a_header_only_copy_stands_in_for_an_absent_shard_and_the_real_one_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot_dir(dir.path());
    std::fs::create_dir_all(&snap).unwrap();
    let (a, b) = (
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    );
    let (fa, fb) = (
        file(&[("x", "BF16", &[10, 4])]),
        file(&[("y", "F32", &[4])]),
    );
    std::fs::write(snap.join(INDEX_FILE), index(&[("x", a), ("y", b)])).unwrap();
    std::fs::write(snap.join(a), &fa).unwrap();
    std::fs::write(
        snap.join(format!("{b}{HEADER_ONLY_SUFFIX}")),
        header_only(&fb),
    )
    .unwrap();
    let w = read_snapshot(&snap).unwrap().unwrap();
    assert_eq!((w.files, w.tensors, w.bytes, w.parameters), (2, 2, 96, 44));
    // with the real shard downloaded beside it, the real one is read (and checked whole)
    std::fs::write(snap.join(b), &fb[..fb.len() - 1]).unwrap();
    let err = read_snapshot(&snap).unwrap_err();
    assert_eq!(err.file, Some(snap.join(b)));
    assert!(
        matches!(err.problem, Problem::DataPastFile { .. }),
        "{err:?}"
    );
    // a single model.safetensors too
    let single = tempfile::tempdir().unwrap();
    std::fs::write(
        single
            .path()
            .join(format!("{SINGLE_FILE}{HEADER_ONLY_SUFFIX}")),
        header_only(&fa),
    )
    .unwrap();
    let w = read_snapshot(single.path()).unwrap().unwrap();
    assert_eq!((w.files, w.bytes), (1, 80));
    // a broken header-only copy names itself
    std::fs::write(
        single
            .path()
            .join(format!("{SINGLE_FILE}{HEADER_ONLY_SUFFIX}")),
        &fa[..20],
    )
    .unwrap();
    let err = read_snapshot(single.path()).unwrap_err();
    assert!(
        err.to_string()
            .contains("model.safetensors.grpofit-header: truncated header"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn a_link_to_a_missing_blob_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let snap = snapshot_dir(dir.path());
    write_linked(
        &snap,
        &[("model.safetensors", &file(&[("x", "F16", &[2])]))],
    );
    std::fs::remove_dir_all(snap.join("../../blobs")).unwrap();
    let err = read_snapshot(&snap).unwrap_err();
    assert!(
        matches!(err.problem, Problem::DanglingLink { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("model.safetensors: links to"),
        "{err}"
    );
}

#[test]
fn index_errors_name_the_index() {
    let cases: [(&[u8], &str); 4] = [
        (b"{", "not JSON"),
        (b"{\"metadata\": {}}", "no weight_map"),
        (b"{\"weight_map\": {\"x\": 3}}", "not a string"),
        (
            b"{\"weight_map\": {\"x\": \"../../x.safetensors\"}}",
            "not a file within",
        ),
    ];
    for (idx, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(INDEX_FILE), idx).unwrap();
        let err = read_snapshot(dir.path()).unwrap_err().to_string();
        assert!(err.contains(INDEX_FILE) && err.contains(says), "{err}");
    }
}

#[test]
fn a_tensor_in_two_shards_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = ("a.safetensors", "b.safetensors");
    let x = file(&[("x", "BF16", &[1])]);
    write_linked(
        &snapshot_dir(dir.path()),
        &[
            (a, &x),
            (b, &x),
            (INDEX_FILE, &index(&[("x", a), ("y", b)])),
        ],
    );
    let err = read_snapshot(&snapshot_dir(dir.path())).unwrap_err();
    assert!(matches!(err.problem, Problem::Duplicate { .. }), "{err:?}");
    assert!(err.to_string().contains("b.safetensors"), "{err}");
}

#[test]
fn a_truncated_header_is_an_error() {
    // fewer than the 8 bytes of the length
    fails(&[7, 0, 0], |p| matches!(p, Problem::NoLength { got: 3 }));
    assert!(matches!(
        read_header(&[][..]).unwrap_err().problem,
        Problem::NoLength { got: 0 }
    ));
    // the length says more than follows
    let whole = file(&[("x", "BF16", &[4])]);
    let cut = &whole[..20];
    let text = fails(cut, |p| matches!(p, Problem::HeaderPastFile { .. }));
    assert!(text.contains("larger than the file"), "{text}");
    let err = read_header(cut).unwrap_err();
    assert!(
        matches!(err.problem, Problem::Truncated { got: 12, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("truncated header"), "{err}");
}

#[test]
fn a_header_length_of_2_63_or_past_the_file_is_an_error() {
    for len in [1u64 << 63, u64::MAX] {
        let mut bytes = len.to_le_bytes().to_vec();
        bytes.extend(b"{}");
        let text = fails(&bytes, |p| matches!(p, Problem::LengthTooLarge { .. }));
        assert!(text.contains("2^63"), "{text}");
    }
    let mut bytes = 1000u64.to_le_bytes().to_vec();
    bytes.extend(b"{}");
    fails(&bytes, |p| {
        matches!(
            p,
            Problem::HeaderPastFile {
                len: 1000,
                file_len: 10
            }
        )
    });
}

#[test]
fn a_header_over_the_limit_is_refused_unread() {
    let len = MAX_HEADER_BYTES + 1;
    let err = read_header(&len.to_le_bytes()[..]).unwrap_err();
    assert!(
        matches!(err.problem, Problem::HeaderTooLarge { .. }),
        "{err:?}"
    );
    // a file that long (sparse): refused before reading
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.safetensors");
    std::fs::write(&path, len.to_le_bytes()).unwrap();
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len + 100)
        .unwrap();
    let err = read_file(&path).unwrap_err();
    assert!(
        matches!(err.problem, Problem::HeaderTooLarge { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("huge.safetensors"), "{err}");
}

#[test]
fn a_header_that_is_not_a_json_object_is_an_error() {
    let text = fails(&raw("{\"x\": ", 0), |p| matches!(p, Problem::NotJson(_)));
    assert!(text.contains("not JSON"), "{text}");
    fails(&raw("[1, 2]", 0), |p| *p == Problem::NotAnObject);
    fails(&raw("\u{0}\u{0}", 0), |p| matches!(p, Problem::NotJson(_)));
    fails(&raw(r#"{"__metadata__": 3}"#, 0), |p| {
        *p == Problem::BadMetadata
    });
}

#[test]
fn bad_tensor_entries_are_errors() {
    let entries = [
        (r#"{"x": 3}"#, "is a number, not an object"),
        (
            r#"{"x": {"shape": [1], "data_offsets": [0, 1]}}"#,
            "no dtype",
        ),
        (
            r#"{"x": {"dtype": 8, "shape": [1], "data_offsets": [0, 1]}}"#,
            "dtype is a number, not a string",
        ),
        (
            r#"{"x": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}"#,
            "shape is not a list",
        ),
        (
            r#"{"x": {"dtype": "U8", "shape": [1], "data_offsets": [0]}}"#,
            "has 1 numbers, not 2",
        ),
        (
            r#"{"x": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1.5]}}"#,
            "data_offsets is not",
        ),
        (
            r#"{"x": {"dtype": "U8", "shape": [4294967296, 4294967296], "data_offsets": [0, 1]}}"#,
            "more than 2^64",
        ),
    ];
    for (header, says) in entries {
        let text = fails(&raw(header, 1), |p| matches!(p, Problem::BadTensor { .. }));
        assert!(
            text.contains(says) && text.contains("\"x\""),
            "{header}: {text}"
        );
    }
}

#[test]
fn data_offsets_out_of_order_overlapping_or_past_the_file_are_errors() {
    let text = fails(
        &raw(
            r#"{"x": {"dtype": "U8", "shape": [0], "data_offsets": [8, 2]}}"#,
            8,
        ),
        |p| {
            matches!(
                p,
                Problem::OffsetsOutOfOrder {
                    begin: 8,
                    end: 2,
                    ..
                }
            )
        },
    );
    assert!(text.contains("out of order"), "{text}");
    let overlap = r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                      "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}"#;
    fails(&raw(overlap, 6), |p| matches!(p, Problem::Overlap { .. }));
    let past = r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                   "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}"#;
    let text = fails(&raw(past, 11), |p| {
        matches!(
            p,
            Problem::DataPastFile {
                end: 12,
                data_len: 11,
                ..
            }
        )
    });
    assert!(
        text.contains("\"b\"") && text.contains("past the file"),
        "{text}"
    );
    // the header alone is sound: only the file's length shows the fault
    assert!(read_header(raw(past, 11).as_slice()).is_ok());
    let mismatch = r#"{"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 4]}}"#;
    fails(&raw(mismatch, 4), |p| {
        matches!(
            p,
            Problem::SizeMismatch {
                expected: 8,
                bytes: 4,
                ..
            }
        )
    });
}

#[test]
fn an_unknown_dtype_is_counted_under_its_name() {
    let header = r#"{"x": {"dtype": "F9_NEW", "shape": [3], "data_offsets": [0, 5]},
                     "y": {"dtype": "F4", "shape": [3], "data_offsets": [5, 7]}}"#;
    let (_dir, read) = read_written(&raw(header, 7));
    let w = read.unwrap().weights();
    assert_eq!(w.bytes_by_dtype["F9_NEW"], 5);
    assert_eq!(w.elements_by_dtype["F9_NEW"], 3);
    assert_eq!(w.bytes_by_dtype["F4"], 2);
    assert_eq!((w.bytes, w.parameters), (7, 6));
}

#[test]
fn no_prefix_or_byte_flip_of_a_file_panics() {
    let bytes = file(&[
        ("a.weight", "U8", &[4, 1]),
        ("a.weight.absmax", "F32", &[1]),
        ("a.weight.quant_map", "F32", &[2]),
        ("a.weight.quant_state.bitsandbytes__nf4", "U8", &[3]),
        ("b_blocks", "U8", &[2, 2]),
        ("b_scales", "U8", &[2]),
    ]);
    let check = |b: &[u8]| {
        if let Ok(h) = read_header(b) {
            let _ = h.check_file_len(b.len() as u64);
            let _ = h.weights();
        }
    };
    for end in 0..=bytes.len() {
        check(&bytes[..end]);
    }
    for at in 0..bytes.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[at] ^= flip;
            check(&b);
        }
    }
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
        if let Ok(h) = read_header(bytes.as_slice()) {
            let _ = h.check_file_len(bytes.len() as u64);
            let _ = h.weights();
        }
    }

    #[test]
    fn arbitrary_headers_never_panic(header in "\\{(\"[a-z_.]{1,6}\": \\{\"dtype\": \"(U8|BF16|F4|X)\", \"shape\": \\[[0-9]{1,3}(, [0-9]{1,20})?\\], \"data_offsets\": \\[[0-9]{1,20}, [0-9]{1,20}\\]\\}, ){0,4}\"__metadata__\": \\{\\}\\}", data in 0u64..64) {
        let bytes = raw(&header, data);
        if let Ok(h) = read_header(bytes.as_slice()) {
            let _ = h.check_file_len(bytes.len() as u64);
            let _ = h.weights();
        }
    }
}
