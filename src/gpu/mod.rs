//! GPU detection, behind a trait so tests and `--gpu-mem` use a fixed probe.
