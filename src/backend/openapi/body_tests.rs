//! Tests of request bodies: which media type is chosen, and how each encoding writes an argument or refuses it.

use serde_json::json;

use super::*;

#[test]
fn json_is_preferred_then_form_multipart_and_text() {
    let chosen =
        |content: Value| choose(Some(&content)).map(|(media_type, _, encoding)| (media_type.clone(), encoding));
    let every = json!({"application/xml": {}, "text/plain": {}, "multipart/form-data": {},
        "application/x-www-form-urlencoded": {}, "application/merge-patch+json": {}});
    assert_eq!(chosen(every), Some(("application/merge-patch+json".into(), Encoding::Json)));
    let no_json = json!({"application/xml": {}, "text/plain": {}, "multipart/form-data": {},
        "application/x-www-form-urlencoded; charset=utf-8": {}});
    assert_eq!(chosen(no_json), Some(("application/x-www-form-urlencoded; charset=utf-8".into(), Encoding::Form)));
    let upload = json!({"application/xml": {}, "text/plain": {}, "multipart/form-data": {}});
    assert_eq!(chosen(upload), Some(("multipart/form-data".into(), Encoding::Multipart)));
    assert_eq!(chosen(json!({"application/xml": {}, "Text/Plain": {}})), Some(("Text/Plain".into(), Encoding::Text)));
    assert_eq!(
        chosen(json!({"application/octet-stream": {}})),
        Some(("application/octet-stream".into(), Encoding::Text))
    );
    assert_eq!(chosen(json!({})), None);
}

#[test]
fn a_form_has_one_field_per_member_and_item_and_json_for_nested_values() {
    let value = json!({"name": "Rex & co", "age": 3, "vaccinated": true, "tags": ["a b", "c"], "owner": {"id": 1},
        "skipped": null});
    let (media_type, bytes) = encode(FORM, Encoding::Form, &value).unwrap();
    assert_eq!(media_type, FORM);
    assert_eq!(
        String::from_utf8(bytes).unwrap(),
        "name=Rex+%26+co&age=3&vaccinated=true&tags=a+b&tags=c&owner=%7B%22id%22%3A1%7D"
    );
}

#[test]
fn a_multipart_body_has_one_part_per_field_and_a_boundary_from_its_content() {
    let value = json!({"note": "hi", "meta": {"k": [1]}});
    let (media_type, bytes) = encode(MULTIPART, Encoding::Multipart, &value).unwrap();
    let boundary = media_type.strip_prefix("multipart/form-data; boundary=").expect("a boundary").to_owned();
    let expected = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n\
         {{\"k\":[1]}}\r\n--{boundary}--\r\n"
    );
    assert_eq!(String::from_utf8(bytes).unwrap(), expected);
    assert_eq!(encode(MULTIPART, Encoding::Multipart, &value).unwrap().0, media_type, "the same bytes again");
    let other = encode(MULTIPART, Encoding::Multipart, &json!({"note": "ho"})).unwrap().0;
    assert_ne!(other, media_type);
}

#[test]
fn an_argument_that_does_not_fit_its_media_type_is_refused() {
    let refused = |media_type: &str, encoding, value: Value| encode(media_type, encoding, &value).unwrap_err().0;
    assert_eq!(
        refused(FORM, Encoding::Form, json!("a=b")),
        "`body` must be an object: it is sent as application/x-www-form-urlencoded, one field per member"
    );
    assert!(refused(MULTIPART, Encoding::Multipart, json!([1])).starts_with("`body` must be an object"));
    assert_eq!(
        refused("text/plain", Encoding::Text, json!({"a": 1})),
        "`body` must be a string: it is sent as text/plain"
    );
    assert_eq!(
        encode("text/plain", Encoding::Text, &json!("hello")).unwrap(),
        ("text/plain".into(), b"hello".to_vec())
    );
}
