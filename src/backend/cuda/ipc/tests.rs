use super::*;

#[test]
fn exported_round_trip() {
    let x = Exported {
        handle: Some(IpcMemHandle([7; 64])),
        bytes: 1 << 33,
        device: 1,
    };
    assert_eq!(Exported::decode(&x.encode()).unwrap(), x);
    let y = Exported {
        handle: None,
        bytes: 0,
        device: 0,
    };
    assert_eq!(Exported::decode(&y.encode()).unwrap(), y);
    assert!(Exported::decode(&[0; 3]).is_err());
}
