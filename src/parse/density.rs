//! Files too dense to parse. tree-sitter keeps 150 to 350 bytes per token of the tree it
//! builds: ordinary code (one token per 4 or 5 bytes) costs 50 to 100 times its size in memory,
//! but a file that is all tokens (`x = [a,a,a,...]`, `a+a+a+...`) costs 350 times: 700 MB for
//! 2 MB, 3 GB for 20 MB. Such a file is skipped before parsing.
//!
//! The count is a cheap over-estimate that needs no tokenizer: every run of identifier or
//! number characters and every ASCII punctuation byte is a token, in strings and comments too
//! (a backslash is not: `\x00` is one escape). Python's standard library and site-packages
//! measure 0.21 tokens per byte at the median, and their densest files, numeric tables, 0.67.

/// A file with more tokens than this is skipped when they are also denser than
/// [`MAX_DENSITY`]: about 350 MB of tree at worst.
pub const MAX_DENSE_TOKENS: usize = 1_000_000;

/// Tokens per byte (as [`count_tokens`] counts them) past which a big file is skipped.
pub const MAX_DENSITY: f64 = 0.8;

/// Whether a text of `tokens` tokens in `bytes` bytes is too dense to parse.
pub fn is_too_dense(tokens: usize, bytes: usize) -> bool {
    tokens > MAX_DENSE_TOKENS && tokens as f64 > MAX_DENSITY * bytes as f64
}

/// The tokens of `text` when it is too dense to parse. A text of no more bytes than
/// [`MAX_DENSE_TOKENS`] is not counted: it has at most one token per byte. That is nearly every
/// file, and counting is a pass over every byte: 2% of a whole lint.
pub fn too_dense(text: &str) -> Option<usize> {
    if text.len() <= MAX_DENSE_TOKENS {
        return None;
    }
    let tokens = count_tokens(text);
    is_too_dense(tokens, text.len()).then_some(tokens)
}

/// The tokens of `text`, over-estimated: at most one per byte.
pub fn count_tokens(text: &str) -> usize {
    let mut tokens = 0;
    let mut in_word = false;
    for &byte in text.as_bytes() {
        let word = byte == b'_' || byte.is_ascii_alphanumeric() || !byte.is_ascii();
        if word {
            tokens += usize::from(!in_word);
        } else if byte.is_ascii_punctuation() && byte != b'\\' {
            tokens += 1;
        }
        in_word = word;
    }
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_and_punctuation() {
        assert_eq!(count_tokens("x = [a,bc, 12]\n"), 9);
        assert_eq!(count_tokens("s = b'\\x00\\x01'"), 7);
        assert_eq!(count_tokens("é_1 + y"), 3);
    }

    #[test]
    fn only_big_and_dense_is_too_dense() {
        let list = format!("x = [{}a]\n", "a,".repeat(MAX_DENSE_TOKENS));
        assert!(is_too_dense(count_tokens(&list), list.len()));
        let small = format!("x = [{}a]\n", "a,".repeat(1000));
        assert!(!is_too_dense(count_tokens(&small), small.len()));
        let ordinary = "value = compute(alpha, beta) + 1  # filler\n".repeat(200_000);
        assert!(!is_too_dense(count_tokens(&ordinary), ordinary.len()));
    }

    #[test]
    fn only_a_text_past_the_limit_is_counted_and_a_dense_one_is_caught() {
        let dense = format!("x = [{}a]\n", "a,".repeat(MAX_DENSE_TOKENS));
        assert_eq!(too_dense(&dense), Some(count_tokens(&dense)));
        // As many bytes as the limit, all punctuation: one token each, not more.
        let punctuation = ",".repeat(MAX_DENSE_TOKENS);
        assert_eq!(count_tokens(&punctuation), MAX_DENSE_TOKENS);
        assert_eq!(too_dense(&punctuation), None);
    }
}
