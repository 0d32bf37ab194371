//! Tests of the session key file: creation (private, shared by racing creators), reading, and refusals.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::front::session::{Sealer, SessionRef};

const TTL: Duration = Duration::from_secs(3600);

fn scratch_dir(name: &str) -> PathBuf {
    let unique = SessionRef::random().unwrap();
    std::env::temp_dir().join(format!("switchyard-session-{name}-{unique}"))
}

#[test]
fn secret_debug_is_redacted() {
    let secret = SessionSecret::from_bytes([0x5a; SECRET_LEN]);
    assert_eq!(format!("{secret:?}"), "<redacted>");
    let sealer = Sealer::new(secret, TTL);
    assert!(format!("{sealer:?}").contains("<redacted>"));
}

#[test]
fn key_file_is_created_private_and_reread() {
    let dir = scratch_dir("create");
    let path = dir.join("nested").join("session.key");
    let created = SessionSecret::load_or_create(&path).unwrap();
    assert_eq!(fs::read(&path).unwrap(), created.0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let reread = SessionSecret::load_or_create(&path).unwrap();
    assert_eq!(reread.0, created.0);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn existing_key_file_is_read_even_when_shared() {
    let dir = scratch_dir("existing");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.key");
    fs::write(&path, [9u8; SECRET_LEN]).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    }
    assert_eq!(SessionSecret::load_or_create(&path).unwrap().0, [9u8; SECRET_LEN]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn racing_creators_agree_on_one_key() {
    let dir = scratch_dir("race");
    let path = dir.join("session.key");
    let keys: Vec<[u8; SECRET_LEN]> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4).map(|_| scope.spawn(|| SessionSecret::load_or_create(&path).unwrap().0)).collect();
        handles.into_iter().map(|handle| handle.join().unwrap()).collect()
    });
    assert!(keys.iter().all(|key| *key == keys[0]));
    assert_eq!(fs::read(&path).unwrap(), keys[0]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_length_key_file_is_refused_naming_the_path() {
    let dir = scratch_dir("wrong");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("short.key");
    fs::write(&path, [1u8; 16]).unwrap();
    let error = SessionSecret::load_or_create(&path).unwrap_err();
    assert!(matches!(error, SessionError::WrongLength { len: 16, .. }), "{error:?}");
    assert!(error.to_string().contains(&path.display().to_string()), "{error}");
    fs::write(&path, [1u8; 33]).unwrap();
    assert!(matches!(SessionSecret::load_or_create(&path), Err(SessionError::WrongLength { len: 33, .. })));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn directory_as_key_file_is_refused() {
    let dir = scratch_dir("dir");
    fs::create_dir_all(&dir).unwrap();
    assert!(matches!(SessionSecret::load_or_create(&dir), Err(SessionError::NotAFile { .. })));
    fs::remove_dir_all(&dir).unwrap();
}
