//! Exact weight sizes from a snapshot's safetensors headers, read without touching the weights.
//!
//! A safetensors file is an 8-byte little-endian header length `N`, then `N` bytes of JSON:
//! `{"__metadata__": {...}, "<tensor>": {"dtype": "BF16", "shape": [..], "data_offsets":
//! [begin, end]}, ...}`, then the tensor data, `data_offsets` counting from its start. A snapshot
//! holds `model.safetensors`, or shards that `model.safetensors.index.json`'s `weight_map` names
//! (transformers looks for them in that order).
//!
//! Packed layouts are recognised by their sibling tensors: bitsandbytes 4-bit (`x.weight` U8 with
//! `x.weight.absmax`, `x.weight.quant_map` and `x.weight.quant_state.bitsandbytes__nf4` or
//! `__fp4`: two parameters a byte), FP8 (`x.weight` F8_E4M3/F8_E5M2 with `x.weight_scale` or
//! `x.weight_scale_inv`) and MXFP4 (gpt-oss: `x_blocks` U8 with `x_scales`: two parameters a
//! byte).

use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

mod problem;
pub use problem::Problem;

/// The largest header (or index.json) read: anything larger is refused, not allocated.
pub const MAX_HEADER_BYTES: u64 = 100 << 20;
/// The most tensors one safetensors header may describe, counted before its JSON is parsed
/// (`count_tensors`), for a header read from the Hub and from the cache alike. A shard holds
/// hundreds to a few thousand tensors; 65,536 refuses a header of 10^6 entries, which took
/// 1.5 GB and 18 s to read from the Hub, 1.45 GB and 10 s from a local file (issue 28).
pub const MAX_TENSORS_PER_FILE: usize = 1 << 16;
/// A snapshot's single weights file.
pub const SINGLE_FILE: &str = "model.safetensors";
/// A sharded snapshot's index.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// What grpofit adds to a safetensors file's name for the file that holds only its first bytes
/// (the 8-byte length and the JSON header, byte for byte), fetched from the Hub by range
/// requests instead of the weights. It sits in the snapshot beside where the weights would be,
/// under a name no other tool reads, so the cache stays a sound huggingface_hub cache: a
/// download of the real file later lands under its own name, and is read first.
pub const HEADER_ONLY_SUFFIX: &str = ".grpofit-header";

/// One tensor as its header describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TensorInfo {
    /// as written (`BF16`); an unknown dtype is kept under its name
    pub dtype: String,
    pub shape: Vec<u64>,
    /// `[begin, end)` within the data that follows the header; `begin <= end`
    pub data_offsets: [u64; 2],
    /// the product of `shape` (1 for a scalar)
    pub elements: u64,
}

impl TensorInfo {
    /// The bytes its data takes.
    pub fn bytes(&self) -> u64 {
        self.data_offsets[1].saturating_sub(self.data_offsets[0])
    }
}

/// A parsed safetensors header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header {
    /// `N`, the JSON's length
    pub header_len: u64,
    /// `__metadata__`'s string values
    pub metadata: BTreeMap<String, String>,
    pub tensors: BTreeMap<String, TensorInfo>,
}

impl Header {
    /// The data the tensors reach into: the largest end offset.
    pub fn data_len(&self) -> u64 {
        self.tensors
            .values()
            .map(|t| t.data_offsets[1])
            .max()
            .unwrap_or(0)
    }

    /// Checks the header and every tensor fit in a file of `file_len` bytes.
    pub fn check_file_len(&self, file_len: u64) -> Result<(), SafetensorsError> {
        self.fits(file_len).map_err(SafetensorsError::bare)
    }

    fn fits(&self, file_len: u64) -> Result<(), Problem> {
        let data_len = file_len
            .checked_sub(8)
            .and_then(|rest| rest.checked_sub(self.header_len))
            .ok_or(Problem::HeaderPastFile {
                len: self.header_len,
                file_len,
            })?;
        match self.tensors.iter().max_by_key(|(_, t)| t.data_offsets[1]) {
            Some((name, t)) if t.data_offsets[1] > data_len => Err(Problem::DataPastFile {
                tensor: name.clone(),
                end: t.data_offsets[1],
                data_len,
            }),
            _ => Ok(()),
        }
    }

    /// What this one file holds.
    pub fn weights(&self) -> WeightsOnDisk {
        WeightsOnDisk::from_tensors(1, &self.tensors)
    }
}

/// What a snapshot's safetensors files hold, from their headers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WeightsOnDisk {
    /// safetensors files read
    pub files: u64,
    pub tensors: u64,
    /// the sum of every tensor's `data_offsets` span
    pub bytes: u64,
    pub bytes_by_dtype: BTreeMap<String, u64>,
    pub elements_by_dtype: BTreeMap<String, u64>,
    /// the model's parameters: every element, except that a packed weight counts the
    /// parameters it holds and its scales, absmax, quant maps and quant states count none
    pub parameters: u64,
    pub packed: Packing,
}

/// The packed (quantised) weights among the tensors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Packing {
    /// bitsandbytes 4-bit NF4: U8 `x.weight` with `x.weight.quant_state.bitsandbytes__nf4`
    pub bnb_nf4: Packed,
    /// bitsandbytes 4-bit FP4: U8 `x.weight` with `x.weight.quant_state.bitsandbytes__fp4`
    pub bnb_fp4: Packed,
    /// FP8 `x.weight` with `x.weight_scale` or `x.weight_scale_inv`
    pub fp8: Packed,
    /// MXFP4 (gpt-oss): U8 `x_blocks` with `x_scales`
    pub mxfp4: Packed,
}

impl Packing {
    /// Whether any packed weight was found.
    pub fn any(&self) -> bool {
        [&self.bnb_nf4, &self.bnb_fp4, &self.fp8, &self.mxfp4]
            .iter()
            .any(|p| p.tensors > 0)
    }
}

/// One packed layout's weights and the tensors that describe them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Packed {
    /// packed weight tensors
    pub tensors: u64,
    /// their bytes
    pub bytes: u64,
    /// the parameters they hold (2 a byte for 4-bit layouts)
    pub parameters: u64,
    /// scales, absmax, quant maps and quant states
    pub aux_tensors: u64,
    pub aux_bytes: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Nf4,
    Fp4,
    Fp8,
    Mxfp4,
}

impl WeightsOnDisk {
    /// Totals `tensors` (every file's, together: a packed weight's siblings may sit in
    /// another shard), read from `files` files.
    pub fn from_tensors(files: u64, tensors: &BTreeMap<String, TensorInfo>) -> WeightsOnDisk {
        let mut w = WeightsOnDisk {
            files,
            ..WeightsOnDisk::default()
        };
        let mut packed: BTreeMap<&str, Kind> = BTreeMap::new();
        let mut aux: BTreeMap<&str, Kind> = BTreeMap::new();
        for (name, t) in tensors {
            if let Some((kind, siblings)) = packing(name, t, tensors) {
                packed.insert(name, kind);
                for s in siblings {
                    aux.insert(s, kind);
                }
            }
        }
        for (name, t) in tensors {
            let bytes = t.bytes();
            w.tensors = w.tensors.saturating_add(1);
            w.bytes = w.bytes.saturating_add(bytes);
            add(&mut w.bytes_by_dtype, &t.dtype, bytes);
            add(&mut w.elements_by_dtype, &t.dtype, t.elements);
            let name = name.as_str();
            if let Some(&kind) = packed.get(name) {
                let p = w.packed.get(kind);
                let parameters = match kind {
                    Kind::Fp8 => t.elements,
                    Kind::Nf4 | Kind::Fp4 | Kind::Mxfp4 => bytes.saturating_mul(2),
                };
                p.tensors = p.tensors.saturating_add(1);
                p.bytes = p.bytes.saturating_add(bytes);
                p.parameters = p.parameters.saturating_add(parameters);
                w.parameters = w.parameters.saturating_add(parameters);
            } else if let Some(&kind) = aux.get(name) {
                let p = w.packed.get(kind);
                p.aux_tensors = p.aux_tensors.saturating_add(1);
                p.aux_bytes = p.aux_bytes.saturating_add(bytes);
            } else {
                w.parameters = w.parameters.saturating_add(t.elements);
            }
        }
        w
    }
}

impl Packing {
    fn get(&mut self, kind: Kind) -> &mut Packed {
        match kind {
            Kind::Nf4 => &mut self.bnb_nf4,
            Kind::Fp4 => &mut self.bnb_fp4,
            Kind::Fp8 => &mut self.fp8,
            Kind::Mxfp4 => &mut self.mxfp4,
        }
    }
}

fn add(map: &mut BTreeMap<String, u64>, key: &str, n: u64) {
    match map.get_mut(key) {
        Some(v) => *v = v.saturating_add(n),
        None => {
            map.insert(key.to_string(), n);
        }
    }
}

/// Whether `name` is a packed weight, and which tensors describe it.
fn packing<'a>(
    name: &str,
    t: &TensorInfo,
    all: &'a BTreeMap<String, TensorInfo>,
) -> Option<(Kind, Vec<&'a str>)> {
    let has = |s: &str| all.contains_key(s);
    let key = |s: &str| all.get_key_value(s).map(|(k, _)| k.as_str());
    if t.dtype == "U8" && name.ends_with(".weight") {
        let kind = if has(&format!("{name}.quant_state.bitsandbytes__nf4")) {
            Some(Kind::Nf4)
        } else if has(&format!("{name}.quant_state.bitsandbytes__fp4")) {
            Some(Kind::Fp4)
        } else {
            None
        };
        if let Some(kind) = kind
            && has(&format!("{name}.absmax"))
            && has(&format!("{name}.quant_map"))
        {
            // absmax, quant_map, nested_absmax, nested_quant_map, quant_state.*
            let prefix = format!("{name}.");
            let siblings = all
                .range::<str, _>((
                    std::ops::Bound::Included(prefix.as_str()),
                    std::ops::Bound::Unbounded,
                ))
                .map(|(k, _)| k.as_str())
                .take_while(|k| k.starts_with(&prefix))
                .collect();
            return Some((kind, siblings));
        }
    }
    if (t.dtype == "F8_E4M3" || t.dtype == "F8_E5M2") && name.ends_with("weight") {
        let scales: Vec<&str> = [format!("{name}_scale"), format!("{name}_scale_inv")]
            .iter()
            .filter_map(|s| key(s))
            .collect();
        if !scales.is_empty() {
            let input = name
                .strip_suffix("weight")
                .and_then(|stem| key(&format!("{stem}input_scale")));
            return Some((Kind::Fp8, scales.into_iter().chain(input).collect()));
        }
    }
    if t.dtype == "U8"
        && let Some(stem) = name.strip_suffix("_blocks")
        && let Some(scales) = key(&format!("{stem}_scales"))
    {
        return Some((Kind::Mxfp4, vec![scales]));
    }
    None
}

/// Bits an element of `dtype` takes; `None` for a dtype grpofit does not know.
pub fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" | "F8_E8M0" => 8,
        "U16" | "I16" | "F16" | "BF16" => 16,
        "U32" | "I32" | "F32" => 32,
        "U64" | "I64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// What is wrong with a safetensors file or index, and which file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafetensorsError {
    /// `None` for a header read from memory
    pub file: Option<PathBuf>,
    pub problem: Problem,
}

impl SafetensorsError {
    fn bare(problem: Problem) -> Self {
        SafetensorsError {
            file: None,
            problem,
        }
    }

    /// Names `file` in a problem.
    fn at(file: &Path) -> impl Fn(Problem) -> SafetensorsError + use<> {
        let file = file.to_path_buf();
        move |problem| SafetensorsError {
            file: Some(file.clone()),
            problem,
        }
    }
}

impl std::fmt::Display for SafetensorsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{}: {}", file.display(), self.problem),
            None => write!(f, "safetensors header: {}", self.problem),
        }
    }
}

impl std::error::Error for SafetensorsError {}

/// Reads a safetensors header from the start of `reader` (a file, or an in-memory buffer such
/// as `&bytes[..]`), reading no further than the header. Checks the header alone: that the
/// tensors fit the file is `Header::check_file_len`.
pub fn read_header(reader: impl Read) -> Result<Header, SafetensorsError> {
    read_from(reader, None).map_err(SafetensorsError::bare)
}

/// Reads the header of the safetensors file at `path` (following links) and checks its tensors
/// lie within the file.
pub fn read_file(path: &Path) -> Result<Header, SafetensorsError> {
    let at = SafetensorsError::at(path);
    let file = open(path).map_err(&at)?;
    let len = file
        .metadata()
        .map_err(|e| at(Problem::Io(e.to_string())))?
        .len();
    let header = read_from(file, Some(len)).map_err(&at)?;
    header.fits(len).map_err(&at)?;
    Ok(header)
}

/// Reads the header of a file holding only a safetensors file's first bytes
/// (`HEADER_ONLY_SUFFIX`): the weights are not there to check against.
pub fn read_header_only(path: &Path) -> Result<Header, SafetensorsError> {
    let at = SafetensorsError::at(path);
    read_from(open(path).map_err(&at)?, None).map_err(&at)
}

/// The file to read for the safetensors file at `path`: itself, else its header-only copy
/// (`HEADER_ONLY_SUFFIX`); `None` when neither is there.
fn stand_in(path: &Path) -> Option<PathBuf> {
    if present(path) {
        return Some(path.to_path_buf());
    }
    let mut name = path.file_name()?.to_os_string();
    name.push(HEADER_ONLY_SUFFIX);
    let header = path.with_file_name(name);
    present(&header).then_some(header)
}

fn is_header_only(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(HEADER_ONLY_SUFFIX))
}

/// What the safetensors files of the snapshot at `dir` hold: `model.safetensors`, else the
/// shards `model.safetensors.index.json` lists; each, when absent, from its header-only copy
/// (`HEADER_ONLY_SUFFIX`). `None` when it has neither.
pub fn read_snapshot(dir: &Path) -> Result<Option<WeightsOnDisk>, SafetensorsError> {
    let single = stand_in(&dir.join(SINGLE_FILE));
    let index = dir.join(INDEX_FILE);
    let files = if let Some(single) = single {
        vec![single]
    } else if present(&index) {
        shards(dir, &index)?
    } else {
        return Ok(None);
    };
    let mut tensors: BTreeMap<String, TensorInfo> = BTreeMap::new();
    let mut from: BTreeMap<String, usize> = BTreeMap::new();
    for (i, file) in files.iter().enumerate() {
        let header = if is_header_only(file) {
            read_header_only(file)?
        } else {
            read_file(file)?
        };
        for (name, t) in header.tensors {
            if let Some(&other) = from.get(&name) {
                let other = files.get(other).cloned().unwrap_or_default();
                return Err(SafetensorsError::at(file)(Problem::Duplicate {
                    tensor: name,
                    other,
                }));
            }
            from.insert(name.clone(), i);
            tensors.insert(name, t);
        }
    }
    let count = u64::try_from(files.len()).unwrap_or(u64::MAX);
    Ok(Some(WeightsOnDisk::from_tensors(count, &tensors)))
}

/// A directory entry, even a link whose target is gone (reading it then says so).
fn present(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// Opens `path` if it is a regular file (`bounded::open_regular`: a FIFO or a device is
/// refused at once, never waited on), telling a dangling link (a cache blob gone) from other
/// failures.
fn open(path: &Path) -> Result<File, Problem> {
    crate::bounded::open_regular(path).map_err(|e| {
        let dangling = path
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
            && e.io_kind() == Some(std::io::ErrorKind::NotFound);
        match std::fs::read_link(path) {
            Ok(target) if dangling => Problem::DanglingLink { target },
            _ => Problem::Io(e.reason()),
        }
    })
}

/// How many tensor entries a header's JSON (`json`, without its 8-byte length) has, counted by
/// their `data_offsets` keys without parsing it.
pub fn count_tensors(json: &[u8]) -> usize {
    const KEY: &[u8] = b"\"data_offsets\"";
    json.windows(KEY.len()).filter(|w| *w == KEY).count()
}

/// The files an index's `weight_map` names, each once, in order; each must be in `dir` (or
/// its header-only copy).
fn shards(dir: &Path, index: &Path) -> Result<Vec<PathBuf>, SafetensorsError> {
    let at = SafetensorsError::at(index);
    let mut text = Vec::new();
    open(index)
        .map_err(&at)?
        .take(MAX_HEADER_BYTES.saturating_add(1))
        .read_to_end(&mut text)
        .map_err(|e| at(Problem::Io(e.to_string())))?;
    let mut files = Vec::new();
    for name in index_files(&text).map_err(&at)? {
        let path =
            stand_in(&dir.join(&name)).ok_or_else(|| at(Problem::MissingShard { shard: name }))?;
        files.push(path);
    }
    Ok(files)
}

/// The files an index.json's `weight_map` names, each once, in order, each a plain relative
/// path within the snapshot.
pub fn index_files(text: &[u8]) -> Result<Vec<String>, Problem> {
    if u64::try_from(text.len()).unwrap_or(u64::MAX) > MAX_HEADER_BYTES {
        return Err(Problem::BadIndex(format!(
            "over the {} MiB grpofit reads",
            MAX_HEADER_BYTES >> 20
        )));
    }
    let json: Value =
        serde_json::from_slice(text).map_err(|e| Problem::BadIndex(format!("not JSON: {e}")))?;
    let Some(map) = json.get("weight_map").and_then(Value::as_object) else {
        return Err(Problem::BadIndex("has no weight_map object".into()));
    };
    let mut names = BTreeSet::new();
    for (tensor, file) in map {
        let Some(file) = file.as_str() else {
            return Err(Problem::BadIndex(format!(
                "weight_map gives tensor {tensor:?} a file that is not a string"
            )));
        };
        names.insert(file);
    }
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        let inside = !name.is_empty()
            && Path::new(name)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if !inside {
            return Err(Problem::BadIndex(format!(
                "weight_map names {name:?}, not a file within the snapshot"
            )));
        }
        files.push(name.to_string());
    }
    Ok(files)
}

/// Reads the length and the header; `file_len` when the source's length is known.
fn read_from(mut reader: impl Read, file_len: Option<u64>) -> Result<Header, Problem> {
    let io = |e: std::io::Error| Problem::Io(e.to_string());
    let mut prefix = Vec::with_capacity(8);
    (&mut reader).take(8).read_to_end(&mut prefix).map_err(io)?;
    let Ok(prefix) = <[u8; 8]>::try_from(prefix.as_slice()) else {
        return Err(Problem::NoLength {
            got: u64::try_from(prefix.len()).unwrap_or(0),
        });
    };
    let len = u64::from_le_bytes(prefix);
    if len >= 1 << 63 {
        return Err(Problem::LengthTooLarge { len });
    }
    if let Some(file_len) = file_len
        && len > file_len.saturating_sub(8)
    {
        return Err(Problem::HeaderPastFile { len, file_len });
    }
    if len > MAX_HEADER_BYTES {
        return Err(Problem::HeaderTooLarge { len });
    }
    // grows as bytes arrive: a length the source cannot back allocates nothing up front
    let mut json = Vec::new();
    reader.take(len).read_to_end(&mut json).map_err(io)?;
    let got = u64::try_from(json.len()).unwrap_or(u64::MAX);
    if got < len {
        return Err(Problem::Truncated { len, got });
    }
    let count = count_tensors(&json);
    if count > MAX_TENSORS_PER_FILE {
        return Err(Problem::TooManyTensors { count });
    }
    parse(&json, len)
}

fn parse(json: &[u8], header_len: u64) -> Result<Header, Problem> {
    let value: Value = serde_json::from_slice(json).map_err(|e| Problem::NotJson(e.to_string()))?;
    let Value::Object(entries) = value else {
        return Err(Problem::NotAnObject);
    };
    let mut header = Header {
        header_len,
        ..Header::default()
    };
    for (name, entry) in entries {
        if name == "__metadata__" {
            let Value::Object(meta) = entry else {
                return Err(Problem::BadMetadata);
            };
            header.metadata = meta
                .into_iter()
                .filter_map(|(k, v)| match v {
                    Value::String(s) => Some((k, s)),
                    _ => None,
                })
                .collect();
            continue;
        }
        let tensor = tensor(&name, &entry)?;
        header.tensors.insert(name, tensor);
    }
    no_overlap(&header.tensors)?;
    Ok(header)
}

fn tensor(name: &str, entry: &Value) -> Result<TensorInfo, Problem> {
    let bad = |what: String| Problem::BadTensor {
        tensor: name.to_string(),
        what,
    };
    let Value::Object(fields) = entry else {
        return Err(bad(format!("is {}, not an object", kind(entry))));
    };
    let dtype = match fields.get("dtype") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => return Err(bad(format!("dtype is {}, not a string", kind(other)))),
        None => return Err(bad("has no dtype".into())),
    };
    let shape = integers(fields.get("shape"))
        .ok_or_else(|| bad("shape is not a list of whole numbers".into()))?;
    let offsets = integers(fields.get("data_offsets"))
        .ok_or_else(|| bad("data_offsets is not a list of whole numbers".into()))?;
    let [begin, end] = <[u64; 2]>::try_from(offsets.as_slice())
        .map_err(|_| bad(format!("data_offsets has {} numbers, not 2", offsets.len())))?;
    if begin > end {
        return Err(Problem::OffsetsOutOfOrder {
            tensor: name.to_string(),
            begin,
            end,
        });
    }
    let elements = shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {shape:?} has more than 2^64 elements")))?;
    let bytes = end.saturating_sub(begin);
    if let Some(bits) = dtype_bits(&dtype) {
        let expected = elements
            .checked_mul(bits)
            .and_then(|b| b.checked_add(7))
            .map(|b| b / 8);
        if expected != Some(bytes) {
            return Err(Problem::SizeMismatch {
                tensor: name.to_string(),
                dtype,
                shape,
                expected: expected.unwrap_or(u64::MAX),
                bytes,
            });
        }
    }
    Ok(TensorInfo {
        dtype,
        shape,
        data_offsets: [begin, end],
        elements,
    })
}

fn integers(v: Option<&Value>) -> Option<Vec<u64>> {
    v?.as_array()?.iter().map(Value::as_u64).collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// No two tensors' data share a byte (empty tensors may sit at any boundary).
fn no_overlap(tensors: &BTreeMap<String, TensorInfo>) -> Result<(), Problem> {
    let mut spans: Vec<(u64, u64, &str)> = tensors
        .iter()
        .map(|(n, t)| (t.data_offsets[0], t.data_offsets[1], n.as_str()))
        .filter(|(b, e, _)| b < e)
        .collect();
    spans.sort_unstable();
    for pair in spans.windows(2) {
        if let [(_, end, before), (begin, _, after)] = pair
            && begin < end
        {
            return Err(Problem::Overlap {
                tensor: (*after).to_string(),
                other: (*before).to_string(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;
