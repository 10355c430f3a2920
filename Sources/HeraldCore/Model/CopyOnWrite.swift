/// A value kept out of line and copied only when written while shared: what
/// keeps ``NotificationRequest`` a few hundred bytes smaller, so that moving
/// a request between stages and into batches is cheap. Compared by value.
///
/// The default (empty) value has no storage at all: copying a request that
/// never set one of these keys touches no reference count. (A shared empty
/// box would: every copy and every release, on every thread, would hit the
/// one object's counter, and the pipeline's stages run on different cores.)
@usableFromInline
struct CopyOnWrite<Value: Sendable & Hashable & DefaultInitializable>: Sendable, Hashable {
    // @unchecked Sendable: `value` is written only through `CopyOnWrite.value`'s
    // `_modify`, after `isKnownUniquelyReferenced` has made the storage this
    // wrapper's own; storage that two wrappers (or two threads) share is never written.
    @usableFromInline
    final class Storage: @unchecked Sendable {
        // Unchecked: every write comes after the uniqueness check above, so no
        // two accesses can overlap; checking each read dynamically cost the
        // localizer a few percent.
        @exclusivity(unchecked) @usableFromInline var value: Value
        @usableFromInline init(_ value: Value) { self.value = value }
    }

    /// `nil` means `Value()`.
    @usableFromInline var storage: Storage?

    @usableFromInline init() { storage = nil }

    /// The whole value. Reading it makes a default value when there is no
    /// storage, and the read is a coroutine: accessors of single fields read
    /// `storage?.value.field` instead, which costs nothing when unset (the
    /// payload builder reads every rarely used key of every request: through
    /// `value` that was most of its time), and their setters write through
    /// `value` only when there is storage or the new value is not `nil` (the
    /// localizer clears keys that were never set: writing made a box for each).
    @inlinable var value: Value {
        _read {
            if let storage { yield storage.value } else { yield Value() }
        }
        _modify {
            if storage == nil {
                storage = Storage(Value())
            } else if !isKnownUniquelyReferenced(&storage) {
                storage = Storage(storage.unsafelyUnwrapped.value)
            }
            yield &storage.unsafelyUnwrapped.value
        }
    }

    /// Whether this holds the default value (reads nothing when there is no storage).
    @inlinable var isDefault: Bool { storage == nil || storage.unsafelyUnwrapped.value == Value() }

    @inlinable static func == (a: Self, b: Self) -> Bool { a.storage === b.storage || a.value == b.value }
    @inlinable func hash(into hasher: inout Hasher) { value.hash(into: &hasher) }
}

/// A value with an empty default, which ``CopyOnWrite`` stores as no storage.
@usableFromInline
protocol DefaultInitializable {
    init()
}
