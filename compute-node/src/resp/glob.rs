//! Redis's glob patterns, matched as Redis 7's `stringmatchlen` matches
//! them: `*`, `?`, classes `[abc]`, `[^a]` and `[a-z]`, and `\` to take
//! the next character as it is. Redis's corner cases are kept: an empty
//! text matches only the empty pattern; a class without its `]` runs to
//! the end of the pattern; a range's bounds are any two bytes around a
//! `-`, `]` included (`[a-]`), compared as signed bytes (C's `char` on
//! x86-64 and most Linux targets) and put in order when given backwards;
//! with `nocase`, an escaped byte in a class still matches only itself.
//! Matching is iterative: no pattern can exhaust the stack, and a failed
//! match costs at most pattern length × text length steps.

/// True if `text` matches `pattern`; `nocase` compares ASCII letters in
/// any case.
pub fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    if text.is_empty() {
        return pattern.is_empty();
    }
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: (pattern index after it, text
    // index). Every other element takes exactly one byte of text, so
    // trying longer runs for the last `*` alone finds every match.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    star = Some((p, t));
                    continue;
                }
                _ if t < text.len() => {
                    // Where the pattern goes on if `text[t]` matches.
                    let next = match pattern[p] {
                        b'?' => Some(p + 1),
                        b'[' => {
                            let (matched, next) = class(pattern, p + 1, text[t], nocase);
                            matched.then_some(next)
                        }
                        b'\\' if p + 1 < pattern.len() => {
                            eq(pattern[p + 1], text[t]).then_some(p + 2)
                        }
                        c => eq(c, text[t]).then_some(p + 1),
                    };
                    if let Some(next) = next {
                        p = next;
                        t += 1;
                        continue;
                    }
                }
                _ => {}
            }
        } else if t == text.len() {
            return true;
        }
        // A mismatch: let the last `*` take one more byte.
        match star {
            Some((after, from)) if from < text.len() => {
                star = Some((after, from + 1));
                p = after;
                t = from + 1;
            }
            _ => return false,
        }
    }
}

/// Matches `c` against the class whose body starts at `at` (after `[`):
/// whether it matched, and where the pattern goes on (after the `]`, or at
/// the pattern's end if the class has none).
fn class(pattern: &[u8], mut at: usize, c: u8, nocase: bool) -> (bool, usize) {
    let lower = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let negate = pattern.get(at) == Some(&b'^');
    if negate {
        at += 1;
    }
    let mut matched = false;
    loop {
        let left = pattern.len() - at;
        if left == 0 {
            return (matched != negate, at);
        }
        if left >= 2 && pattern[at] == b'\\' {
            at += 1;
            matched |= pattern[at] == c;
        } else if pattern[at] == b']' {
            return (matched != negate, at + 1);
        } else if left >= 3 && pattern[at + 1] == b'-' {
            let (mut start, mut end) = (pattern[at], pattern[at + 2]);
            if (start as i8) > (end as i8) {
                std::mem::swap(&mut start, &mut end);
            }
            let (start, end, c) = (lower(start) as i8, lower(end) as i8, lower(c) as i8);
            matched |= start <= c && c <= end;
            at += 2;
        } else {
            matched |= lower(pattern[at]) == lower(c);
        }
        at += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_redis_matches_them() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", false),
            ("**", "", false),
            ("", "", true),
            ("", "a", false),
            ("*", "anything", true),
            ("max*", "maxmemory", true),
            ("max*", "amax", false),
            ("*memory*", "maxmemory-policy", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-c]llo", "hbllo", true),
            ("h[a-c]llo", "hdllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("databases", "databases", true),
        ];
        for &(pattern, text, want) in cases {
            assert_eq!(
                matches(pattern.as_bytes(), text.as_bytes(), false),
                want,
                "{pattern} vs {text}"
            );
        }
        assert!(matches(b"DATA*", b"databases", true));
        assert!(!matches(b"DATA*", b"databases", false));
    }

    #[test]
    fn redis_s_corner_cases_are_kept() {
        let cases: &[(&[u8], &[u8], bool)] = &[
            // `]` can be a range's end: `[b-]` is the range `]`..`b`.
            (b"a[b-]", b"ab", true),
            (b"a[b-]", b"a]", true),
            (b"a[b-]", b"a^", true),
            (b"a[b-]", b"a-", false),
            // A `-` first or last before `]` is itself.
            (b"a[-b]", b"a-", true),
            (b"a[-b]", b"ab", true),
            (b"a[-b]", b"ac", false),
            // Ranges given backwards are put in order.
            (b"a[c-a]", b"ab", true),
            (b"a[c-a]", b"ad", false),
            // An empty class matches nothing; negated, anything.
            (b"a[]", b"a", false),
            (b"a[]", b"ab", false),
            (b"a[]b]", b"ab", false),
            (b"a[]b]", b"ab]", false),
            (b"a[^]", b"ax", true),
            (b"a[^]", b"a", false),
            // A class without `]` runs to the end of the pattern.
            (b"a[b", b"ab", true),
            (b"a[b", b"ac", false),
            (b"a[", b"ab", false),
            (b"a[^", b"ab", true),
            (b"[", b"[", false),
            // Escapes, in a class and out of one; a `\` at the end is itself.
            (b"a[\\]]", b"a]", true),
            (b"a[\\]]", b"a\\", false),
            (b"a[\\-]", b"a-", true),
            (b"a\\", b"a\\", true),
            (b"a\\", b"a", false),
            (b"\\?", b"?", true),
            (b"\\?", b"x", false),
            (b"a[\\", b"a\\", true),
            // Bounds are signed bytes: 0xff is -1, below `a`; 0x80 is -128.
            (b"[a-\xff]", b"\xff", true),
            (b"[a-\xff]", b"0", true),
            (b"[a-\xff]", b"b", false),
            (b"[a-\xff]", b"\x80", false),
            (b"[\x80-\x90]", b"\x85", true),
            (b"[\x80-\x90]", b"a", false),
            // Several stars, and a star that must take many bytes.
            (b"*a*b*c*", b"xxaxxbxxcxx", true),
            (b"*a*b*c*", b"xxaxxcxxbxx", false),
            (
                b"a*a*a*a*a*a*a*b",
                b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
            (b"*?", b"x", true),
            (b"?*", b"", false),
        ];
        for &(pattern, text, want) in cases {
            assert_eq!(
                matches(pattern, text, false),
                want,
                "{:?} vs {:?}",
                String::from_utf8_lossy(pattern),
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn nocase_folds_letters_but_not_escapes_in_a_class() {
        assert!(matches(b"h[A-C]llo", b"hbllo", true));
        assert!(matches(b"H\\Ello", b"hello", true));
        assert!(!matches(b"h[\\E]llo", b"hello", true));
        assert!(matches(b"h[\\e]llo", b"hello", true));
        // Swapped first, folded after: `[Z-a]` folds to `z`..`a`, empty.
        assert!(!matches(b"[Z-a]", b"z", true));
        assert!(!matches(b"[Z-a]", b"a", true));
        assert!(matches(b"[Z-a]", b"_", false));
    }

    #[test]
    fn a_long_pattern_of_stars_neither_recurses_nor_takes_exponential_time() {
        let pattern: Vec<u8> = b"a*".repeat(100_000);
        let text = vec![b'a'; 1000];
        assert!(!matches(&pattern, &text, false));
        assert!(matches(&pattern[..2000], &text, false));
    }
}
