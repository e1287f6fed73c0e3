//! The switch behind every engine's deliberate bugs (each engine's `mutation.rs` lists its
//! own with [`mutations!`](crate::mutations)). One definition, so that the simulations of
//! both engines turn mutations on and off the same way, and each engine's test can take
//! every mutation from `ALL` (one added to the list cannot be left out of its test).
//!
//! What a caller may rely on: without the caller's `mutations` feature, `active` is a
//! constant `false` (the `cfg` is evaluated in the crate that expands the macro), so normal
//! builds carry no switch at all.

/// Defines, in the calling module, `set(Option<M>)` and `active(M) -> bool` for the
/// `#[repr(u8)]` enum `M` of an engine's mutations, one process-wide switch. The variants'
/// discriminants must be at least 1: 0 means "none on".
#[macro_export]
macro_rules! mutation_switch {
    ($m:ty) => {
        #[cfg(feature = "mutations")]
        static ACTIVE: ::std::sync::atomic::AtomicU8 = ::std::sync::atomic::AtomicU8::new(0);

        /// Turns one mutation on (or all off with `None`) for the whole process.
        #[cfg(feature = "mutations")]
        pub fn set(m: Option<$m>) {
            let on = m.map_or(0, |m| m as u8);
            assert_eq!(
                on == 0,
                m.is_none(),
                "a mutation's discriminant is 0: {m:?}"
            );
            ACTIVE.store(on, ::std::sync::atomic::Ordering::SeqCst);
        }

        /// Whether `m` is the mutation turned on.
        #[cfg(feature = "mutations")]
        pub fn active(m: $m) -> bool {
            ACTIVE.load(::std::sync::atomic::Ordering::Relaxed) == m as u8
        }

        /// Whether `m` is the mutation turned on: never, without the `mutations` feature.
        #[cfg(not(feature = "mutations"))]
        #[inline(always)]
        pub fn active(_m: $m) -> bool {
            false
        }
    };
}

/// Defines an engine's list of mutations: the `#[repr(u8)]` enum (each variant with its
/// discriminant, at least 1, and its doc comment saying which rule it breaks), `ALL` (every
/// variant, in order), and the switch of [`mutation_switch!`](crate::mutation_switch).
#[macro_export]
macro_rules! mutations {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $n:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u8)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $n ),*
        }

        impl $name {
            /// Every mutation of the list, in order.
            pub const ALL: &'static [$name] = &[$( $name::$variant ),*];
        }

        $crate::mutation_switch!($name);
    };
}
