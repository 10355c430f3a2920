/// A value kept out of line and copied only when written while shared: what
/// keeps ``NotificationRequest`` a few hundred bytes smaller, so that moving
/// a request between stages and into batches is cheap. Compared by value.
@usableFromInline
struct CopyOnWrite<Value: Sendable & Hashable>: Sendable, Hashable {
    // @unchecked Sendable: `value` is written only through `CopyOnWrite.value`'s
    // `_modify`, after `isKnownUniquelyReferenced` has made the storage this
    // wrapper's own; storage that two wrappers (or two threads) share is never written.
    @usableFromInline
    final class Storage: @unchecked Sendable {
        @usableFromInline var value: Value
        @usableFromInline init(_ value: Value) { self.value = value }
    }

    @usableFromInline var storage: Storage

    @usableFromInline init(_ value: Value) { storage = Storage(value) }
    /// Shares `storage` (a shared empty value costs no allocation per request).
    @usableFromInline init(sharing storage: Storage) { self.storage = storage }

    @inlinable var value: Value {
        _read { yield storage.value }
        _modify {
            if !isKnownUniquelyReferenced(&storage) { storage = Storage(storage.value) }
            yield &storage.value
        }
    }

    @inlinable static func == (a: Self, b: Self) -> Bool { a.storage === b.storage || a.storage.value == b.storage.value }
    @inlinable func hash(into hasher: inout Hasher) { storage.value.hash(into: &hasher) }
}
