//! What is wrong with a safetensors file, its header or a snapshot's index.

use super::{MAX_HEADER_BYTES, MAX_TENSORS_PER_FILE};
use std::path::PathBuf;

/// What is wrong. Tensor names are the file's, quoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// the file could not be opened or read
    Io(String),
    /// a snapshot link whose blob is gone
    DanglingLink {
        target: PathBuf,
    },
    /// fewer than the 8 bytes that give the header's length
    NoLength {
        got: u64,
    },
    /// a header length of 2^63 or more
    LengthTooLarge {
        len: u64,
    },
    /// a header longer than `MAX_HEADER_BYTES`
    HeaderTooLarge {
        len: u64,
    },
    /// a header describing more than `MAX_TENSORS_PER_FILE` tensors
    TooManyTensors {
        count: usize,
    },
    /// a header longer than the file
    HeaderPastFile {
        len: u64,
        file_len: u64,
    },
    /// fewer header bytes than its length says
    Truncated {
        len: u64,
        got: u64,
    },
    NotJson(String),
    NotAnObject,
    /// `__metadata__` is not an object
    BadMetadata,
    /// a tensor entry that is not `{dtype, shape, data_offsets}`
    BadTensor {
        tensor: String,
        what: String,
    },
    /// `begin > end`
    OffsetsOutOfOrder {
        tensor: String,
        begin: u64,
        end: u64,
    },
    /// two tensors' data overlap
    Overlap {
        tensor: String,
        other: String,
    },
    /// a known dtype whose shape needs other than its span
    SizeMismatch {
        tensor: String,
        dtype: String,
        shape: Vec<u64>,
        expected: u64,
        bytes: u64,
    },
    /// a tensor's data ends past the file
    DataPastFile {
        tensor: String,
        end: u64,
        data_len: u64,
    },
    /// an index.json that is not `{"weight_map": {"<tensor>": "<file>"}}`
    BadIndex(String),
    /// a shard the index lists is not in the snapshot
    MissingShard {
        shard: String,
    },
    /// a tensor in two files
    Duplicate {
        tensor: String,
        other: PathBuf,
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Io(e) => write!(f, "cannot read it: {e}"),
            Problem::DanglingLink { target } => write!(
                f,
                "links to {}, which is missing (an interrupted download?)",
                target.display()
            ),
            Problem::NoLength { got } => write!(
                f,
                "truncated header: {got} bytes, fewer than the 8 that give the header's length"
            ),
            Problem::LengthTooLarge { len } => {
                write!(
                    f,
                    "header length {len} is 2^63 or more: not a safetensors file"
                )
            }
            Problem::HeaderTooLarge { len } => write!(
                f,
                "header length {len} is over the {} MiB grpofit reads",
                MAX_HEADER_BYTES >> 20
            ),
            Problem::TooManyTensors { count } => write!(
                f,
                "the header describes {count} tensors, more than the {MAX_TENSORS_PER_FILE} grpofit reads in one file"
            ),
            Problem::HeaderPastFile { len, file_len } => write!(
                f,
                "header length {len} is larger than the file ({file_len} bytes)"
            ),
            Problem::Truncated { len, got } => write!(
                f,
                "truncated header: its length says {len} bytes, only {got} follow"
            ),
            Problem::NotJson(e) => write!(f, "header is not JSON: {e}"),
            Problem::NotAnObject => write!(f, "header is not a JSON object"),
            Problem::BadMetadata => write!(f, "header's __metadata__ is not an object"),
            Problem::BadTensor { tensor, what } => write!(f, "tensor {tensor:?}: {what}"),
            Problem::OffsetsOutOfOrder { tensor, begin, end } => write!(
                f,
                "tensor {tensor:?}: data_offsets [{begin}, {end}] out of order"
            ),
            Problem::Overlap { tensor, other } => write!(
                f,
                "tensor {tensor:?}: data_offsets overlap those of {other:?}"
            ),
            Problem::SizeMismatch {
                tensor,
                dtype,
                shape,
                expected,
                bytes,
            } => write!(
                f,
                "tensor {tensor:?}: {dtype} {shape:?} takes {expected} bytes, but its data_offsets span {bytes}"
            ),
            Problem::DataPastFile {
                tensor,
                end,
                data_len,
            } => write!(
                f,
                "tensor {tensor:?}: data_offsets end at {end}, past the file's {data_len} bytes of data"
            ),
            Problem::BadIndex(what) => write!(f, "{what}"),
            Problem::MissingShard { shard } => {
                write!(f, "lists shard {shard:?}, which is not in the snapshot")
            }
            Problem::Duplicate { tensor, other } => {
                write!(f, "tensor {tensor:?} is in {} too", other.display())
            }
        }
    }
}
