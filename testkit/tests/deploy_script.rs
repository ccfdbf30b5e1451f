//! `scripts/deploy ENV` refuses what would deploy something no commit holds, before it builds:
//! uncommitted changes, one-off parameter overrides, an env samconfig.toml lacks. (Its build
//! and deploy are `scripts/sam-build` and `sam deploy`, which need the deploy tools and an
//! account: not run here.) Run in a throwaway git repository holding the script and
//! samconfig.toml, so the refusal is the script's own and nothing of this checkout changes.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn run(dir: &Path, program: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn deploy_refuses_uncommitted_changes_overrides_and_unknown_envs_before_building() {
    let dir = std::env::temp_dir().join(format!("deploy-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::copy(root().join("scripts/deploy"), dir.join("scripts/deploy")).unwrap();
    std::fs::copy(root().join("samconfig.toml"), dir.join("samconfig.toml")).unwrap();
    // A stand-in build that must never run: the refusals come first.
    std::fs::write(
        dir.join("scripts/sam-build"),
        "#!/bin/sh\necho BUILT; exit 1\n",
    )
    .unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &["commit", "-qm", "release"],
    ] {
        let (code, out) = run(&dir, "git", args);
        assert_eq!(code, 0, "git {args:?}: {out}");
    }
    let deploy = dir.join("scripts/deploy");
    let deploy = deploy.to_str().unwrap();

    let (code, out) = run(
        &dir,
        "bash",
        &[deploy, "prod", "--parameter-overrides", "Stage=dev"],
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--parameter-overrides is refused"), "{out}");

    let (code, out) = run(&dir, "bash", &[deploy, "staging"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("samconfig.toml has no env staging"), "{out}");

    let (code, out) = run(&dir, "bash", &[deploy]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("usage: scripts/deploy ENV"), "{out}");

    std::fs::write(dir.join("scripts/new-file"), "untracked\n").unwrap();
    let (code, out) = run(&dir, "bash", &[deploy, "prod"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("uncommitted changes"), "{out}");
    assert!(out.contains("new-file"), "{out}");
    assert!(!out.contains("BUILT"), "{out}");

    std::fs::remove_dir_all(&dir).unwrap();
}
