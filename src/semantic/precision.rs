//! Whether a file already trains in reduced precision, or hands precision to something that
//! decides it: `torch.autocast` (any spelling), a `GradScaler`, a model or tensors cast to
//! float16 / bfloat16 / float8, NVIDIA apex, or a framework that owns the loop's precision
//! (Accelerate's `mixed_precision`, Lightning's `precision=`, DeepSpeed's config). TL301 asks.
//!
//! Read from the text, as evidence the file deals with precision somewhere: a suggestion to
//! turn mixed precision on is wrong for a file that configures it, wherever it does, and the
//! spellings (a config key `fp16`, `dtype=torch.bfloat16`, `args.bf16`) are many.

/// What a file says about precision, where it says something.
const MARKERS: &[&str] = &[
    "autocast",
    "GradScaler",
    "float16",
    "bfloat16",
    "float8",
    ".half()",
    "torch.half",
    "fp16",
    "bf16",
    "fp8",
    "mixed_precision",
    "precision=",
    "set_default_dtype",
    "apex",
    "accelerate",
    "lightning",
    "deepspeed",
];

/// The first marker of reduced precision (or of a framework that sets it) the file holds.
pub fn reduced_precision(source: &str) -> Option<&'static str> {
    MARKERS
        .iter()
        .copied()
        .find(|marker| super::analysis::file_mentions(source, marker))
}

#[cfg(test)]
mod tests {
    use super::reduced_precision;

    #[test]
    fn every_spelling_of_reduced_precision_is_evidence() {
        assert_eq!(
            reduced_precision("with torch.cuda.amp.autocast():\n    y = model(x)\n"),
            Some("autocast")
        );
        assert_eq!(
            reduced_precision("model = Net().to(device, dtype=torch.bfloat16)\n"),
            Some("float16")
        );
        assert_eq!(reduced_precision("if args.fp16:\n    pass\n"), Some("fp16"));
        assert_eq!(reduced_precision("y = model(x.cuda())\n"), None);
    }
}
