//! The policy format's configs, read by the core's own `serde` derives from a token stream the
//! TypeScript side writes (it parses the JSON with `JSON.parse`; numbers cross as `f64`, so no
//! float parser is linked here). No allocation: strings are borrowed from the buffer.
//!
//! The tokens, one byte each, then their payload:
//! `n` null, `t` true, `f` false, `d` a number (8 bytes, `f64` little-endian), `s` a string (a
//! `u32` length little-endian, then UTF-8), `{` a map (key string, value, ...) closed by `}`, `[`
//! a sequence closed by `]`.
//!
//! An error says where (the keys from the config's root, dotted) and what, as text: the
//! TypeScript side prefixes the layer's path in the file.
//!
//! Size: every config type's derive is instantiated with this reader, and each moves the error
//! through every `Result` it returns, so the error the reader passes around ([`Fail`]) is one
//! byte; its text is written aside (`with_text`) and copied out into a [`DeError`] once, by
//! [`from_tokens`]. (With the text inside the error, 200 bytes on wasm32, the readers were most of
//! the module.) Only one error is alive at a time: the reader never recovers from one.
//!
//! The readers are the non-generic [`retry`], [`budget`], [`breaker`] and so on: every
//! instantiation of the derives is made here, in this crate, which the module's profile
//! optimises for size (they run once per policy loaded), while the call engine is optimised for
//! speed.
#![cfg_attr(target_arch = "wasm32", no_std)]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering::Relaxed};

use reliable_core::Duration;
use reliable_core::breaker::BreakerConfig;
use reliable_core::budget::{BudgetConfig, RatioConfig};
use reliable_core::hedge::HedgeConfig;
use reliable_core::limit::{LimiterConfig, RateConfig};
use reliable_core::retry::RetryConfig;
use reliable_core::throttle::ThrottleConfig;

use serde::de::{
    self, DeserializeSeed, EnumAccess, Expected, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};

/// Nesting deeper than this is refused (a config nests three or four levels).
const MAX_DEPTH: usize = 24;

/// The longest error text kept (longer ones are cut).
const TEXT: usize = 192;

/// Why a config could not be read: its text is `path: message`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DeError {
    text: [u8; TEXT],
    len: usize,
}

impl DeError {
    /// The error's text.
    pub fn text(&self) -> &[u8] {
        self.text.get(..self.len).unwrap_or_default()
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(core::str::from_utf8(self.text()).unwrap_or("refused"))
    }
}

/// The text of the error being passed up (atomics only to be a `static` without `unsafe`: a
/// wasm32 instance has one thread, and they compile to plain loads and stores there).
struct Text {
    bytes: [AtomicU8; TEXT],
    len: AtomicUsize,
}

impl Text {
    const fn new() -> Self {
        Text {
            bytes: [const { AtomicU8::new(0) }; TEXT],
            len: AtomicUsize::new(0),
        }
    }

    fn clear(&self) {
        self.len.store(0, Relaxed);
    }

    fn copy(&self) -> DeError {
        let mut e = DeError {
            text: [0; TEXT],
            len: self.len.load(Relaxed).min(TEXT),
        };
        for (to, from) in e.text.iter_mut().zip(&self.bytes).take(e.len) {
            *to = from.load(Relaxed);
        }
        e
    }
}

impl Write for &Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Truncates rather than fail.
        for &b in s.as_bytes() {
            let n = self.len.load(Relaxed);
            if let Some(slot) = self.bytes.get(n) {
                slot.store(b, Relaxed);
                self.len.store(n + 1, Relaxed);
            }
        }
        Ok(())
    }
}

/// Runs `f` on the error text: the module's one text, or the test thread's own.
#[cfg(target_arch = "wasm32")]
fn with_text<R>(f: impl FnOnce(&Text) -> R) -> R {
    static TEXT: Text = Text::new();
    f(&TEXT)
}

/// Runs `f` on the error text: the module's one text, or the test thread's own.
#[cfg(not(target_arch = "wasm32"))]
fn with_text<R>(f: impl FnOnce(&Text) -> R) -> R {
    std::thread_local! {
        static TEXT: Text = const { Text::new() };
    }
    TEXT.with(f)
}

/// The error the reader passes up; its text is aside (`with_text`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fail {
    /// The path was written (the innermost map the error went through names it).
    placed: bool,
}

impl Fail {
    /// A new error: `args` is its text.
    #[inline(never)]
    fn message(args: fmt::Arguments<'_>) -> Self {
        with_text(|mut t| {
            t.clear();
            let _ = t.write_fmt(args);
        });
        Fail { placed: false }
    }

    /// Puts `path` (dotted keys) before the message, once: the innermost map sets it.
    #[inline(never)]
    fn place(self, path: &Path<'_>) -> Self {
        if self.placed {
            return self;
        }
        with_text(|mut t| {
            let message = t.copy();
            t.clear();
            let _ = write!(t, "{path}: ");
            let _ = t.write_str(core::str::from_utf8(message.text()).unwrap_or("refused"));
        });
        Fail { placed: true }
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        with_text(|t| t.copy()).fmt(f)
    }
}

impl de::StdError for Fail {}

/// The unexpected value, named without printing it (a float's printer has panic paths).
fn kind(u: &Unexpected<'_>) -> &'static str {
    match u {
        Unexpected::Bool(_) => "a boolean",
        Unexpected::Unsigned(_) | Unexpected::Signed(_) | Unexpected::Float(_) => "a number",
        Unexpected::Char(_) | Unexpected::Str(_) => "a string",
        Unexpected::Unit | Unexpected::Option => "null",
        Unexpected::Seq => "a list",
        Unexpected::Map => "an object",
        _ => "a value of another kind",
    }
}

/// `message`, then each of `names` as `` `name` ``, comma-separated.
fn one_of(message: fmt::Arguments<'_>, names: &'static [&'static str]) -> Fail {
    let e = Fail::message(message);
    with_text(|mut t| {
        for (i, v) in names.iter().enumerate() {
            let _ = write!(t, "{} `{v}`", if i == 0 { "" } else { "," });
        }
    });
    e
}

impl de::Error for Fail {
    #[inline(never)]
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Fail::message(format_args!("{msg}"))
    }
    #[inline(never)]
    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Fail::message(format_args!("expected {exp}, got {}", kind(&unexp)))
    }
    #[inline(never)]
    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        Fail::message(format_args!(
            "expected {exp}, got {} out of it",
            kind(&unexp)
        ))
    }
    #[inline(never)]
    fn invalid_length(len: usize, exp: &dyn Expected) -> Self {
        Fail::message(format_args!("expected {exp}, got {len} elements"))
    }
    #[inline(never)]
    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        one_of(
            format_args!("unknown variant `{variant}`, expected one of"),
            expected,
        )
    }
    #[inline(never)]
    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        one_of(
            format_args!("unknown field `{field}`, expected one of"),
            expected,
        )
    }
    #[inline(never)]
    fn missing_field(field: &'static str) -> Self {
        Fail::message(format_args!("missing field `{field}`"))
    }
    #[inline(never)]
    fn duplicate_field(field: &'static str) -> Self {
        Fail::message(format_args!("duplicate field `{field}`"))
    }
}

/// Where the reader is: the keys (and list indices) from the root.
#[derive(Clone, Copy, Debug)]
pub struct Path<'de> {
    steps: [Step<'de>; MAX_DEPTH],
    len: usize,
}

#[derive(Clone, Copy, Debug)]
enum Step<'de> {
    Key(&'de str),
    Index(usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, step) in self.steps.iter().take(self.len).enumerate() {
            match step {
                Step::Key(k) if i == 0 => f.write_str(k)?,
                Step::Key(k) => write!(f, ".{k}")?,
                Step::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// Reads a value of the token stream.
pub struct Tokens<'de> {
    buf: &'de [u8],
    pos: usize,
    path: Path<'de>,
}

/// Reads a `T` from `buf` (one value, nothing after it).
// Large, but returned once per config read, on the way out of one refused.
#[allow(clippy::result_large_err)]
pub fn from_tokens<'de, T: serde::Deserialize<'de>>(buf: &'de [u8]) -> Result<T, DeError> {
    let mut t = Tokens {
        buf,
        pos: 0,
        path: Path {
            steps: [Step::Index(0); MAX_DEPTH],
            len: 0,
        },
    };
    // An error no map placed is the root's: an empty path (the text starts with ": ").
    let read = T::deserialize(&mut t)
        .map_err(|e| e.place(&t.path))
        .and_then(|value| {
            if t.pos != buf.len() {
                return Err(Fail::message(format_args!("trailing tokens")));
            }
            Ok(value)
        });
    read.map_err(|_| with_text(Text::copy))
}

fn broken() -> Fail {
    Fail::message(format_args!("malformed tokens"))
}

impl<'de> Tokens<'de> {
    fn peek(&self) -> Result<u8, Fail> {
        self.buf.get(self.pos).copied().ok_or_else(broken)
    }

    fn next(&mut self) -> Result<u8, Fail> {
        let b = self.peek()?;
        self.pos += 1;
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'de [u8], Fail> {
        let end = self.pos.checked_add(n).ok_or_else(broken)?;
        let s = self.buf.get(self.pos..end).ok_or_else(broken)?;
        self.pos = end;
        Ok(s)
    }

    fn number(&mut self) -> Result<f64, Fail> {
        let a: [u8; 8] = self.take(8)?.try_into().map_err(|_| broken())?;
        Ok(f64::from_le_bytes(a))
    }

    fn string(&mut self) -> Result<&'de str, Fail> {
        let a: [u8; 4] = self.take(4)?.try_into().map_err(|_| broken())?;
        let n = u32::from_le_bytes(a) as usize;
        core::str::from_utf8(self.take(n)?).map_err(|_| broken())
    }

    fn enter(&mut self, step: Step<'de>) -> Result<(), Fail> {
        let slot = self
            .path
            .steps
            .get_mut(self.path.len)
            .ok_or_else(|| Fail::message(format_args!("nested too deeply")))?;
        *slot = step;
        self.path.len += 1;
        Ok(())
    }

    fn leave(&mut self) {
        self.path.len = self.path.len.saturating_sub(1);
    }

    /// Skips one value.
    fn skip(&mut self, depth: usize) -> Result<(), Fail> {
        if depth > MAX_DEPTH {
            return Err(Fail::message(format_args!("nested too deeply")));
        }
        match self.next()? {
            b'n' | b't' | b'f' => Ok(()),
            b'd' => self.number().map(|_| ()),
            b's' => self.string().map(|_| ()),
            b'{' => loop {
                if self.peek()? == b'}' {
                    self.pos += 1;
                    return Ok(());
                }
                self.skip(depth + 1)?;
                self.skip(depth + 1)?;
            },
            b'[' => loop {
                if self.peek()? == b']' {
                    self.pos += 1;
                    return Ok(());
                }
                self.skip(depth + 1)?;
            },
            _ => Err(broken()),
        }
    }
}

impl<'de> de::Deserializer<'de> for &mut Tokens<'de> {
    type Error = Fail;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Fail> {
        match self.next()? {
            b'n' => visitor.visit_unit(),
            b't' => visitor.visit_bool(true),
            b'f' => visitor.visit_bool(false),
            b'd' => {
                let v = self.number()?;
                // Whole numbers as integers (a `u32` field reads no float).
                const EXACT: f64 = 9_007_199_254_740_992.0;
                // (`fract` is std's: a whole number is one that survives the round trip.)
                let whole = (-EXACT..=EXACT).contains(&v) && (v as i64) as f64 == v;
                if whole && v >= 0.0 {
                    visitor.visit_u64(v as u64)
                } else if whole {
                    visitor.visit_i64(v as i64)
                } else {
                    visitor.visit_f64(v)
                }
            }
            b's' => visitor.visit_borrowed_str(self.string()?),
            b'{' => visitor.visit_map(Entries { t: self }),
            b'[' => visitor.visit_seq(Items { t: self, index: 0 }),
            _ => Err(broken()),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Fail> {
        if self.peek()? == b'n' {
            self.pos += 1;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Fail> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Fail> {
        match self.next()? {
            b's' => visitor.visit_enum(self.string()?.into_deserializer()),
            b'{' => {
                if self.peek()? != b's' {
                    return Err(broken());
                }
                self.pos += 1;
                let name = self.string()?;
                self.enter(Step::Key(name))?;
                let value = visitor
                    .visit_enum(Variant { t: self, name })
                    .map_err(|e| e.place(&self.path));
                self.leave();
                let value = value?;
                if self.next()? != b'}' {
                    return Err(Fail::message(format_args!(
                        "an enum's object holds one variant"
                    )));
                }
                Ok(value)
            }
            _ => Err(Fail::message(format_args!(
                "expected a variant's name or an object of one variant"
            ))),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Fail> {
        self.skip(0)?;
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier
    }
}

/// A map's entries.
struct Entries<'a, 'de> {
    t: &'a mut Tokens<'de>,
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = Fail;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Fail> {
        if self.t.peek()? == b'}' {
            self.t.pos += 1;
            return Ok(None);
        }
        if self.t.peek()? != b's' {
            return Err(broken());
        }
        let at = self.t.pos;
        self.t.pos += 1;
        let key = self.t.string()?;
        // Read again as the value below names it.
        let end = self.t.pos;
        self.t.pos = at;
        let k = seed
            .deserialize(&mut *self.t)
            .map_err(|e| e.place(&self.t.path))?;
        self.t.pos = end;
        self.t.enter(Step::Key(key))?;
        Ok(Some(k))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Fail> {
        let v = seed
            .deserialize(&mut *self.t)
            .map_err(|e| e.place(&self.t.path));
        self.t.leave();
        v
    }
}

/// A sequence's items.
struct Items<'a, 'de> {
    t: &'a mut Tokens<'de>,
    index: usize,
}

impl<'de> SeqAccess<'de> for Items<'_, 'de> {
    type Error = Fail;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Fail> {
        if self.t.peek()? == b']' {
            self.t.pos += 1;
            return Ok(None);
        }
        self.t.enter(Step::Index(self.index))?;
        self.index += 1;
        let v = seed
            .deserialize(&mut *self.t)
            .map_err(|e| e.place(&self.t.path));
        self.t.leave();
        v.map(Some)
    }
}

/// An enum written as an object of one variant: `{"Exponential": {...}}`.
struct Variant<'a, 'de> {
    t: &'a mut Tokens<'de>,
    name: &'de str,
}

impl<'de> EnumAccess<'de> for Variant<'_, 'de> {
    type Error = Fail;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Fail> {
        let name: de::value::BorrowedStrDeserializer<'de, Fail> =
            de::value::BorrowedStrDeserializer::new(self.name);
        let v = seed.deserialize(name)?;
        Ok((v, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Fail;

    fn unit_variant(self) -> Result<(), Fail> {
        self.t.skip(0)
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Fail> {
        seed.deserialize(&mut *self.t)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Fail> {
        de::Deserializer::deserialize_any(&mut *self.t, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Fail> {
        de::Deserializer::deserialize_any(&mut *self.t, visitor)
    }
}

/// Readers of one config each, out of line: the only instantiations of the derives.
macro_rules! readers {
    ($($(#[$doc:meta])* $name:ident -> $t:ty;)*) => {$(
        $(#[$doc])*
        // Large, but returned once per config read, on the way out of one refused.
        #[allow(clippy::result_large_err)]
        #[inline(never)]
        pub fn $name(tokens: &[u8]) -> Result<$t, DeError> {
            from_tokens(tokens)
        }
    )*};
}

readers! {
    /// A `Retry`'s `policy`.
    retry -> RetryConfig;
    /// A `Retry`'s `budget`.
    budget -> BudgetConfig;
    /// A `Breaker`'s `config`.
    breaker -> BreakerConfig;
    /// A `Throttle`'s `config`.
    throttle -> ThrottleConfig;
    /// A `Ledger`'s `config`.
    ledger -> RatioConfig;
    /// A `Hedge`'s `config`.
    hedge -> HedgeConfig;
    /// A `Limit`'s `config`.
    limit -> LimiterConfig;
    /// A `RateLimit`'s `config`.
    rate -> RateConfig;
    /// A `Call`'s `timeout` (a duration or null).
    call_timeout -> Option<Duration>;
}
