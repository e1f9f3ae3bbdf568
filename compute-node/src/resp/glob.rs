//! Redis's glob patterns (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a]`,
//! `[a-z]`, and `\` to take the next character as it is.

/// True if `text` matches `pattern`; `nocase` compares ASCII letters in
/// any case.
pub fn matches(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: (pattern index after it, text index).
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
                    // How many pattern bytes match `text[t]`, if it matches.
                    let advance = match pattern[p] {
                        b'?' => Some(1),
                        b'[' => class(pattern, p + 1, text[t], nocase)
                            .and_then(|(matched, next)| matched.then_some(next - p)),
                        b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], text[t]).then_some(2),
                        c => eq(c, text[t]).then_some(1),
                    };
                    if let Some(advance) = advance {
                        p += advance;
                        t += 1;
                        continue;
                    }
                }
                _ => {}
            }
        } else if t == text.len() {
            return true;
        }
        // A mismatch: let the last `*` take one more character.
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

/// Matches `c` against the class starting after `[` at `at`: whether it
/// matched and where the pattern goes on (after `]`, or at its end).
fn class(pattern: &[u8], mut at: usize, c: u8, nocase: bool) -> Option<(bool, usize)> {
    let fold = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    let c = fold(c);
    let negate = pattern.get(at) == Some(&b'^');
    if negate {
        at += 1;
    }
    let mut matched = false;
    while at < pattern.len() && pattern[at] != b']' {
        if pattern[at] == b'\\' && at + 1 < pattern.len() {
            matched |= fold(pattern[at + 1]) == c;
            at += 2;
        } else if at + 2 < pattern.len() && pattern[at + 1] == b'-' && pattern[at + 2] != b']' {
            let (mut lo, mut hi) = (fold(pattern[at]), fold(pattern[at + 2]));
            if lo > hi {
                std::mem::swap(&mut lo, &mut hi);
            }
            matched |= (lo..=hi).contains(&c);
            at += 3;
        } else {
            matched |= fold(pattern[at]) == c;
            at += 1;
        }
    }
    let next = if at < pattern.len() { at + 1 } else { at };
    Some((matched != negate, next))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_redis_matches_them() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
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
}
