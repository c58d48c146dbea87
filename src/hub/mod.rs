//! Finding a model's `config.json` outside the catalog: the local Hugging Face cache.

pub mod cache;
