//! What `[env]` sets for the command, said before it starts: every variable, and a warning for
//! those that change which programs and libraries run (`PATH`, `LD_*` such as `LD_PRELOAD`, the
//! dynamic loader's, ld.so(8); `PYTHON*` such as `PYTHONPATH`, Python's own, python(1)).

/// Whether setting `key` changes what code the command runs.
fn changes_code(key: &str) -> bool {
    key == "PATH" || key.starts_with("LD_") || key.starts_with("PYTHON")
}

/// The lines to say for `env` (the run file's `[env]`, as the command gets it); none when empty.
pub(super) fn lines(env: &[(String, String)]) -> Vec<String> {
    if env.is_empty() {
        return Vec::new();
    }
    let set: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut out = vec![format!("grpofit: [env] sets {}", set.join(" "))];
    out.extend(env.iter().filter(|(k, _)| changes_code(k)).map(|(k, _)| {
        format!(
            "grpofit: warning: [env] sets {k}: it changes which programs or libraries the command runs"
        )
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variable_is_said_and_code_changing_ones_warned() {
        let env = [
            (
                "PYTORCH_CUDA_ALLOC_CONF".to_string(),
                "expandable_segments:True".to_string(),
            ),
            ("LD_PRELOAD".to_string(), "/tmp/x.so".to_string()),
        ];
        let said = lines(&env);
        assert_eq!(
            said[0],
            "grpofit: [env] sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True LD_PRELOAD=/tmp/x.so"
        );
        assert_eq!(said.len(), 2);
        assert!(said[1].contains("LD_PRELOAD"));
        assert!(lines(&[]).is_empty());
    }
}
