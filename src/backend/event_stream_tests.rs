//! Tests of `backend::event_stream`.

use super::*;
use proptest::prelude::*;

const LIMIT: usize = 1 << 16;

fn decode_chunks(chunks: &[&[u8]]) -> (Vec<SseEvent>, String, Option<u64>) {
    let mut dec = SseDecoder::new(LIMIT);
    let mut events = Vec::new();
    for chunk in chunks {
        dec.feed(chunk).expect("within limit");
        events.extend(std::iter::from_fn(|| dec.next_event()));
    }
    (events, dec.last_event_id().to_owned(), dec.retry_ms())
}

/// Decodes with a limit the generated streams often exceed, stopping at the first error.
fn decode_bounded(chunks: &[&[u8]]) -> (Vec<SseEvent>, Option<SseError>) {
    let mut dec = SseDecoder::new(8);
    let mut events = Vec::new();
    for chunk in chunks {
        let result = dec.feed(chunk);
        events.extend(std::iter::from_fn(|| dec.next_event()));
        if let Err(e) = result {
            return (events, Some(e));
        }
    }
    (events, None)
}

fn decode(input: &[u8]) -> Vec<SseEvent> {
    decode_chunks(&[input]).0
}

fn ev(event: &str, data: &str, id: &str) -> SseEvent {
    SseEvent { event: event.into(), data: data.into(), id: id.into() }
}

#[test]
fn lf_cr_and_crlf_all_end_lines() {
    let want = vec![ev("", "a\nb\nc", "")];
    assert_eq!(decode(b"data: a\ndata: b\ndata: c\n\n"), want);
    assert_eq!(decode(b"data: a\rdata: b\rdata: c\r\r"), want);
    assert_eq!(decode(b"data: a\r\ndata: b\r\ndata: c\r\n\r\n"), want);
    assert_eq!(decode(b"data: a\rdata: b\r\ndata: c\n\r\n"), want);
}

#[test]
fn crlf_split_across_chunks_is_one_line_end() {
    // Were the LF a second line end, it would be a blank line and dispatch "a" early as its own event.
    let (events, _, _) = decode_chunks(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]);
    assert_eq!(events, vec![ev("", "a\nb", "")]);
}

#[test]
fn cr_at_chunk_end_completes_the_line_at_once() {
    let mut dec = SseDecoder::new(LIMIT);
    dec.feed(b"data: a\n\r").expect("within limit");
    assert_eq!(dec.next_event(), Some(ev("", "a", "")));
}

#[test]
fn cr_then_lf_after_empty_chunk_is_still_one_line_end() {
    let (events, _, _) = decode_chunks(&[b"data: a\r", b"", b"\ndata: b\n\n"]);
    assert_eq!(events, vec![ev("", "a\nb", "")]);
}

#[test]
fn leading_bom_is_ignored() {
    assert_eq!(decode(b"\xEF\xBB\xBFdata: x\n\n"), vec![ev("", "x", "")]);
}

#[test]
fn bom_split_across_chunks_is_ignored() {
    let (events, _, _) = decode_chunks(&[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"]);
    assert_eq!(events, vec![ev("", "x", "")]);
}

#[test]
fn only_one_bom_is_ignored() {
    // A second BOM is part of the first line's field name, so the line is an unknown field.
    assert_eq!(decode(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n"), vec![]);
}

#[test]
fn bom_prefix_that_is_not_a_bom_is_kept_as_content() {
    let (events, _, _) = decode_chunks(&[b"data: \xEF", b"x\n\n"]);
    assert_eq!(events, vec![ev("", "\u{FFFD}x", "")]);
    let (events, _, _) = decode_chunks(&[b"\xEF\xBB", b"data: x\n\ndata: y\n\n"]);
    // The held bytes become a mangled field name, so only the second event survives.
    assert_eq!(events, vec![ev("", "y", "")]);
}

#[test]
fn comments_are_ignored() {
    assert_eq!(decode(b": keep-alive\ndata: x\n:data: y\n\n"), vec![ev("", "x", "")]);
    assert_eq!(decode(b": only a comment\n\n"), vec![]);
}

#[test]
fn field_without_colon_has_empty_value() {
    assert_eq!(decode(b"data\n\n"), vec![ev("", "", "")]);
    assert_eq!(decode(b"data\ndata\ndata: x\n\n"), vec![ev("", "\n\nx", "")]);
}

#[test]
fn exactly_one_leading_space_is_stripped() {
    assert_eq!(decode(b"data:x\n\n"), vec![ev("", "x", "")]);
    assert_eq!(decode(b"data:  x \n\n"), vec![ev("", " x ", "")]);
    assert_eq!(decode(b"data: a: b\n\n"), vec![ev("", "a: b", "")]);
}

#[test]
fn event_sets_type_for_one_event_only() {
    assert_eq!(decode(b"event: progress\ndata: 1\n\ndata: 2\n\n"), vec![ev("progress", "1", ""), ev("", "2", "")]);
}

#[test]
fn id_persists_and_is_committed_at_dispatch() {
    let mut dec = SseDecoder::new(LIMIT);
    dec.feed(b"id: 7\ndata: a\n\ndata: b\n\nid: 8\ndata: c\n").expect("within limit");
    assert_eq!(dec.next_event(), Some(ev("", "a", "7")));
    assert_eq!(dec.next_event(), Some(ev("", "b", "7")));
    assert_eq!(dec.next_event(), None);
    // The block with id 8 is unfinished, so a reconnect must still resume after 7.
    assert_eq!(dec.last_event_id(), "7");
    dec.feed(b"\n").expect("within limit");
    assert_eq!(dec.next_event(), Some(ev("", "c", "8")));
    assert_eq!(dec.last_event_id(), "8");
}

#[test]
fn empty_id_resets_last_event_id() {
    let (events, last, _) = decode_chunks(&[b"id: 1\ndata: a\n\nid\ndata: b\n\n"]);
    assert_eq!(events, vec![ev("", "a", "1"), ev("", "b", "")]);
    assert_eq!(last, "");
}

#[test]
fn id_with_nul_is_ignored() {
    let (events, last, _) = decode_chunks(&[b"id: 1\ndata: a\n\nid: 2\0x\ndata: b\n\n"]);
    assert_eq!(events, vec![ev("", "a", "1"), ev("", "b", "1")]);
    assert_eq!(last, "1");
}

#[test]
fn retry_accepts_only_ascii_digits() {
    let retry = |input: &[u8]| decode_chunks(&[input]).2;
    assert_eq!(retry(b"retry: 1500\n"), Some(1500));
    assert_eq!(retry(b"retry: 1500\nretry: 15x\n"), Some(1500));
    assert_eq!(retry(b"retry: -1\n"), None);
    assert_eq!(retry(b"retry: +1\n"), None);
    assert_eq!(retry(b"retry: 1.5\n"), None);
    assert_eq!(retry(b"retry:\n"), None);
    assert_eq!(retry(b"retry:  1\n"), None);
    assert_eq!(retry(b"retry: 99999999999999999999999\n"), None);
    assert_eq!(retry(b"retry: 18446744073709551615\n"), Some(u64::MAX));
}

#[test]
fn retry_alone_dispatches_nothing() {
    assert_eq!(decode(b"retry: 10\n\n"), vec![]);
}

#[test]
fn unknown_fields_are_ignored() {
    assert_eq!(decode(b"foo: bar\nData: no\ndata: x\nretryx: 5\n\n"), vec![ev("", "x", "")]);
    assert_eq!(decode(b"foo: bar\n\n"), vec![]);
}

#[test]
fn nothing_is_dispatched_without_a_blank_line() {
    let mut dec = SseDecoder::new(LIMIT);
    dec.feed(b"data: x\n").expect("within limit");
    assert_eq!(dec.next_event(), None);
}

#[test]
fn priming_event_is_delivered_with_empty_data() {
    assert_eq!(decode(b"id: p1\ndata:\n\n"), vec![ev("", "", "p1")]);
    assert_eq!(decode(b"id: p1\n\n"), vec![ev("", "", "p1")]);
}

#[test]
fn blocks_that_set_nothing_dispatch_nothing() {
    assert_eq!(decode(b"\n\n\r\n"), vec![]);
    assert_eq!(decode(b"event: x\n\n"), vec![]);
    // The type of a dropped block must not leak into the next one.
    assert_eq!(decode(b"event: x\n\ndata: y\n\n"), vec![ev("", "y", "")]);
}

#[test]
fn invalid_utf8_is_decoded_lossily() {
    assert_eq!(
        decode(b"event: \xFF\ndata: a\xC3\ndata: \xE2\x82\n\n"),
        vec![ev("\u{FFFD}", "a\u{FFFD}\n\u{FFFD}", "")]
    );
    let (events, _, _) = decode_chunks(&[b"data: \xE2\x82", b"\xAC\n\n"]);
    assert_eq!(events, vec![ev("", "\u{20AC}", "")]);
}

#[test]
fn line_at_the_limit_is_accepted() {
    let mut dec = SseDecoder::new(8);
    assert_eq!(dec.feed(b"data: ab\n\n"), Ok(()));
    assert_eq!(dec.next_event(), Some(ev("", "ab", "")));
}

#[test]
fn complete_line_over_the_limit_is_an_error() {
    let mut dec = SseDecoder::new(8);
    assert_eq!(dec.feed(b"data: abc\n\n"), Err(SseError::LineTooLong { limit: 8 }));
}

#[test]
fn partial_line_over_the_limit_fails_before_its_end() {
    let mut dec = SseDecoder::new(8);
    assert_eq!(dec.feed(b"data: ab"), Ok(()));
    assert_eq!(dec.feed(b"c"), Err(SseError::LineTooLong { limit: 8 }));
    // Feeding after the error keeps failing instead of resuming mid-line.
    assert_eq!(dec.feed(b"\n\n"), Err(SseError::LineTooLong { limit: 8 }));
    assert_eq!(dec.next_event(), None);
}

#[test]
fn partial_non_data_line_over_the_limit_fails_before_its_end() {
    // Data lines are streamed into the data buffer; every other line is held and checked separately.
    let mut dec = SseDecoder::new(8);
    assert_eq!(dec.feed(b"event: a"), Ok(()));
    assert_eq!(dec.feed(b"b"), Err(SseError::LineTooLong { limit: 8 }));
}

#[test]
fn accumulated_data_over_the_limit_is_an_error() {
    let mut dec = SseDecoder::new(8);
    // Each line fits; the joined data "abc\nde\nfg" (9 bytes) does not.
    assert_eq!(dec.feed(b"data:abc\ndata:de\n"), Ok(()));
    assert_eq!(dec.feed(b"data:fg\n"), Err(SseError::LineTooLong { limit: 8 }));
}

#[test]
fn accumulated_data_over_the_limit_fails_before_the_line_ends() {
    let mut dec = SseDecoder::new(12);
    assert_eq!(dec.feed(b"data:abcdef\ndata:x"), Ok(()));
    assert_eq!(dec.feed(b"yzw"), Ok(()));
    // The line "data:xyzwuv" still fits; the data "abcdef\nxyzwuv" (13 bytes) does not.
    assert_eq!(dec.feed(b"uv"), Err(SseError::LineTooLong { limit: 12 }));
}

#[test]
fn line_recognised_as_data_only_by_its_last_chunk_is_not_a_blank_line() {
    // The held "data" becomes a streamed data line while its end is being handled; treating the emptied
    // partial buffer as a blank line would dispatch early.
    let (events, _, _) = decode_chunks(&[b"data", b": x\ndata: y\n\n"]);
    assert_eq!(events, vec![ev("", "x\ny", "")]);
}

#[test]
fn large_event_fed_bytewise_is_decoded() {
    let payload = vec![b'x'; 1 << 20];
    let mut input = b"data: ".to_vec();
    input.extend_from_slice(&payload);
    input.extend_from_slice(b"\n\n");
    let mut dec = SseDecoder::new(2 << 20);
    for byte in &input {
        dec.feed(std::slice::from_ref(byte)).expect("within limit");
    }
    let event = dec.next_event().expect("one event");
    assert_eq!(event.data.len(), payload.len());
}

/// A straightforward reading of the rules over the whole stream, to check the incremental decoder against.
fn reference(input: &[u8]) -> (Vec<SseEvent>, String, Option<u64>) {
    let input = input.strip_prefix(BOM).unwrap_or(input);
    let text = String::from_utf8_lossy(input).replace("\r\n", "\n").replace('\r', "\n");
    let mut lines: Vec<&str> = text.split('\n').collect();
    // The text after the last line end is an unterminated line, which is never processed.
    lines.pop();
    let (mut events, mut last_id, mut retry) = (Vec::new(), String::new(), None);
    let (mut event, mut data, mut id): (String, Option<String>, Option<String>) = (String::new(), None, None);
    for line in lines {
        if line.is_empty() {
            if let Some(new_id) = id.take() {
                last_id = new_id;
                data.get_or_insert_with(String::new);
            }
            if let Some(d) = data.take() {
                events.push(ev(&event, &d, &last_id));
            }
            event.clear();
            continue;
        }
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match name {
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            "event" => event = value.to_owned(),
            "id" if !value.contains('\0') => id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                retry = value.parse().ok().or(retry);
            }
            _ => {}
        }
    }
    (events, last_id, retry)
}

fn line_strategy() -> impl Strategy<Value = Vec<u8>> {
    let value = "[a-c é:\u{0}]{0,6}";
    prop_oneof![
        value.prop_map(|v| format!("data: {v}")),
        value.prop_map(|v| format!("data:{v}")),
        Just("data".to_owned()),
        value.prop_map(|v| format!("event: {v}")),
        value.prop_map(|v| format!("id: {v}")),
        "[0-9]{1,4}".prop_map(|v| format!("retry: {v}")),
        value.prop_map(|v| format!("retry: {v}")),
        value.prop_map(|v| format!(":{v}")),
        value.prop_map(|v| format!("x{v}")),
        Just(String::new()),
        Just(String::new()),
    ]
    .prop_map(String::into_bytes)
}

fn stream_strategy() -> impl Strategy<Value = Vec<u8>> {
    let line_end = prop_oneof![Just(&b"\n"[..]), Just(&b"\r"[..]), Just(&b"\r\n"[..])];
    (any::<bool>(), prop::collection::vec((line_strategy(), line_end), 0..40), prop::collection::vec(any::<u8>(), 0..3))
        .prop_map(|(bom, lines, tail)| {
            let mut out = if bom { BOM.to_vec() } else { Vec::new() };
            for (line, end) in lines {
                out.extend_from_slice(&line);
                out.extend_from_slice(end);
            }
            // Stray bytes (possibly invalid UTF-8 or a lone line end) after the last line.
            out.extend_from_slice(&tail);
            out
        })
}

fn split_at_points<'a>(input: &'a [u8], points: &[usize]) -> Vec<&'a [u8]> {
    let mut cuts: Vec<usize> = points.iter().map(|p| p % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(&input[start..cut]);
        start = cut;
    }
    chunks.push(&input[start..]);
    chunks
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_chunking_decodes_like_the_whole_stream(
        input in stream_strategy(),
        points in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let whole = decode_chunks(&[&input]);
        let bytewise: Vec<&[u8]> = input.chunks(1).collect();
        prop_assert_eq!(&decode_chunks(&bytewise), &whole);
        prop_assert_eq!(&decode_chunks(&split_at_points(&input, &points)), &whole);
        prop_assert_eq!(&reference(&input), &whole);
    }

    #[test]
    fn any_chunking_hits_the_limit_at_the_same_line(
        input in stream_strategy(),
        points in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let whole = decode_bounded(&[&input]);
        let bytewise: Vec<&[u8]> = input.chunks(1).collect();
        prop_assert_eq!(&decode_bounded(&bytewise), &whole);
        prop_assert_eq!(&decode_bounded(&split_at_points(&input, &points)), &whole);
    }
}
