use super::super::profile::tests::{hand, identity};
use super::*;

fn temp(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bulkmem-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn with_version(mut p: Profile) -> Profile {
    p.bulkmem = env!("CARGO_PKG_VERSION").into();
    p
}

#[test]
fn statuses_for_every_way_a_profile_can_be_wrong() {
    let id = identity();
    let good = with_version(hand());
    let p = temp("good.toml", &good.to_toml());
    assert_eq!(
        Profile::load(&p, &id).unwrap(),
        Profile::parse(&good.to_toml()).unwrap()
    );

    let missing = std::env::temp_dir().join("bulkmem-no-such-dir/profile.toml");
    assert_eq!(
        Profile::load(&missing, &id),
        Err(ProfileStatus::Missing {
            path: missing.clone()
        })
    );

    let text = good.to_toml();
    type Check = fn(&ProfileStatus) -> bool;
    let cases: Vec<(&str, String, Check)> = vec![
        ("truncated", text[..text.len() - 40].to_string(), |s| {
            matches!(s, ProfileStatus::Invalid { .. })
        }),
        ("garbage", "\u{7f}ELF\u{2}\u{1}".into(), |s| {
            matches!(s, ProfileStatus::Invalid { .. })
        }),
        (
            "old-format",
            text.replacen(&format!("format = {FORMAT}"), "format = 1", 1),
            |s| matches!(s, ProfileStatus::Outdated { .. }),
        ),
        (
            "old-version",
            text.replacen(
                &format!("bulkmem = \"{}\"", env!("CARGO_PKG_VERSION")),
                "bulkmem = \"0.0.1\"",
                1,
            ),
            |s| matches!(s, ProfileStatus::Outdated { why, .. } if why.contains("0.0.1")),
        ),
        (
            "foreign",
            text.replacen("model = 1", "model = 17", 1),
            |s| matches!(s, ProfileStatus::Foreign { why, .. } if why.contains("model")),
        ),
    ];
    for (name, body, ok) in cases {
        let p = temp(&format!("{name}.toml"), &body);
        let st = Profile::load(&p, &id).unwrap_err();
        assert!(ok(&st), "{name}: {st}");
        assert_eq!(st.path(), Some(p.as_path()));
        assert!(st.to_string().contains("built-in rules"), "{st}");
    }
    let p = temp("binary.toml", "");
    std::fs::write(&p, [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(
        Profile::load(&p, &id),
        Err(ProfileStatus::Invalid { .. })
    ));
}

#[test]
fn the_system_profile_is_read_only_when_root_alone_can_write_it() {
    use std::os::unix::fs::PermissionsExt;
    let id = identity();
    let p = temp("system.toml", &with_version(hand()).to_toml());
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    for (mode, ok) in [(0o644, root), (0o664, false), (0o646, false)] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        match Profile::load_system(&p, &id) {
            Ok(_) => assert!(ok, "mode {mode:o} accepted"),
            Err(st) => {
                assert!(!ok, "mode {mode:o} refused: {st}");
                assert!(st.to_string().contains("owned by root"), "{st}");
            }
        }
    }
    // The user's own path takes any owner and mode.
    assert!(Profile::load(&p, &id).is_ok());
    assert!(id.system_profile_path().starts_with(SYSTEM_PROFILE_DIR));
    assert!(id
        .system_profile_path()
        .ends_with(format!("profile-{}.toml", id.key())));
}

#[test]
fn the_user_profile_comes_first_then_the_system_one() {
    use std::os::unix::fs::PermissionsExt;
    let id = identity();
    let text = with_version(hand()).to_toml();
    let user = temp("resolve-user.toml", &text);
    let system = temp("resolve-system.toml", &text);
    std::fs::set_permissions(&system, std::fs::Permissions::from_mode(0o644)).unwrap();
    let nowhere = std::env::temp_dir().join("bulkmem-no-such-dir/p.toml");
    let path_of = |r: (Option<Profile>, ProfileStatus)| r.1.path().map(Path::to_path_buf);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let r = resolve(false, None, Some(user.clone()), &system, &id);
    assert_eq!(path_of(r), Some(user.clone()), "the user's first");
    let r = resolve(false, None, Some(nowhere.clone()), &system, &id);
    if root {
        assert!(r.1.is_tuned());
        assert_eq!(
            path_of(r),
            Some(system.clone()),
            "no user profile: the system's"
        );
    } else {
        assert_eq!(
            r.1,
            ProfileStatus::Missing {
                path: nowhere.clone()
            }
        );
    }
    let r = resolve(false, None, None, &system, &id);
    assert_eq!(r.1.is_tuned(), root, "no HOME: the system's");
    // A broken user profile is reported, not passed over.
    let broken = temp("resolve-broken.toml", &format!("format = {FORMAT}\n"));
    let r = resolve(false, None, Some(broken), &system, &id);
    assert!(matches!(r.1, ProfileStatus::Invalid { .. }), "{}", r.1);
    // BULKMEM_PROFILE names one file, or none.
    let r = resolve(
        false,
        Some(ProfileSetting::File(nowhere.clone())),
        Some(user.clone()),
        &system,
        &id,
    );
    assert_eq!(
        r.1,
        ProfileStatus::Missing {
            path: nowhere.clone()
        }
    );
    let r = resolve(
        false,
        Some(ProfileSetting::Off),
        Some(user.clone()),
        &system,
        &id,
    );
    assert_eq!(r.1, ProfileStatus::Off);
    // Setuid: only the system profile, and Secure without one.
    let r = resolve(true, None, None, &system, &id);
    assert_eq!(r.1.is_tuned(), root);
    let r = resolve(true, None, None, &nowhere, &id);
    assert_eq!(r.1, ProfileStatus::Secure);
    // A system profile others may write is never read.
    std::fs::set_permissions(&system, std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = resolve(true, None, None, &system, &id);
    assert_eq!(r.1, ProfileStatus::Secure);
}

#[test]
fn default_path_is_keyed_by_the_cpu() {
    let id = identity();
    if let Some(p) = id.profile_path() {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(name, format!("profile-{}.toml", id.key()));
        assert!(p.parent().unwrap().ends_with("bulkmem"));
    }
    assert!(ProfileStatus::Tuned {
        path: "x".into(),
        age: Duration::from_secs(7300)
    }
    .to_string()
    .contains("2 h ago"));
}
