import HeraldCore

/// The notifications written on one gateway connection and not yet known to
/// be accepted, and what an error response means for each of them.
///
/// The binary interface never acknowledges: a notification is accepted when
/// no error names it or an earlier one. This type keeps that bookkeeping for
/// any transport (the in-memory simulator transport, the TLS transport):
///
/// 1. On a fresh connection, ``append(_:)`` each notification as it is
///    written; it returns the identifier to put in the frame (a wrapping
///    32-bit sequence, per connection, starting at ``firstIdentifier``).
/// 2. When an ``ErrorResponse`` arrives, ``resolve(_:)`` splits the window:
///    the notifications written before the named one were accepted, the named
///    one is rejected with the status, and every later one was discarded by
///    APNs and must be written again on a new connection. For status 10
///    (shutdown) the identifier names the *last good* notification: it and
///    everything before are accepted, everything after is to resend.
/// 3. At a quiet point (the provider waited and no error came back, or it is
///    closing cleanly), ``acceptAll()`` moves everything to accepted.
/// 4. When the connection drops with no error response, ``connectionLost()``
///    returns everything in flight: nothing can be known about it, so it is
///    resent (at least once; APNs may already have taken some of it).
///
/// After a resolution or a loss the window is empty; ``reset(firstIdentifier:)``
/// starts the identifiers again for the next connection.
///
/// Identifiers are looked up in O(1): they are consecutive in write order.
///
/// ```swift
/// var window = InFlightWindow<Envelope>()
/// for e in batch { var f = e.frame!; f.setIdentifier(window.append(e)); buffer.append(f.bytes) }
/// // … an error response arrives:
/// let r = window.resolve(response)
/// record(r.accepted, .accepted); if let (e, s) = r.rejected { record(e, .rejected(s)) }
/// resendOnNewConnection(r.resend)
/// ```
public struct InFlightWindow<Item> {
    @usableFromInline var items: [Item] = []
    @usableFromInline var head = 0
    /// The identifier of `items[head]`.
    @usableFromInline var headIdentifier: UInt32
    /// The identifier the next ``append(_:)`` returns.
    public private(set) var nextIdentifier: UInt32
    /// Where identifiers start on a new connection.
    public private(set) var firstIdentifier: UInt32

    /// An empty window whose identifiers start at `firstIdentifier` (1 by default,
    /// so 0 is free to mean "no identifier" in logs).
    public init(firstIdentifier: UInt32 = 1) {
        self.firstIdentifier = firstIdentifier
        headIdentifier = firstIdentifier
        nextIdentifier = firstIdentifier
    }

    /// Notifications in flight.
    public var count: Int { items.count - head }
    public var isEmpty: Bool { count == 0 }

    /// The items in flight, oldest first.
    public var inFlight: ArraySlice<Item> { items[head...] }

    /// Records `item` as written now and returns its identifier for this connection.
    @discardableResult
    public mutating func append(_ item: consuming Item) -> UInt32 {
        let id = nextIdentifier
        items.append(item)
        nextIdentifier &+= 1
        return id
    }

    /// The item written with `identifier`, if it is in flight.
    public func item(withIdentifier identifier: UInt32) -> Item? {
        index(of: identifier).map { items[$0] }
    }

    func index(of identifier: UInt32) -> Int? {
        let k = Int(identifier &- headIdentifier)
        return k < count ? head + k : nil
    }

    /// Everything in flight was accepted (a quiet point). Returns it, oldest first.
    public mutating func acceptAll() -> [Item] {
        take(upTo: items.count)
    }

    /// Accepts the items up to and including `identifier`, if it is in flight
    /// (e.g. after a delay long enough that no error can still come for them).
    public mutating func accept(through identifier: UInt32) -> [Item] {
        guard let i = index(of: identifier) else { return [] }
        return take(upTo: i + 1)
    }

    mutating func take(upTo end: Int) -> [Item] {
        if head == 0 && end > 0 && items.count - end <= end {
            // Most of the window from its start (a confirmation's common case: all but the
            // probe that drew the answer): the array handed over and the few after `end` copied
            // back, not the many copied out item by item (a retain of each item's references,
            // then a release of the originals).
            var rest: [Item] = []
            rest.reserveCapacity(items.count)
            rest.append(contentsOf: items[end...])
            items.removeSubrange(end...)
            swap(&rest, &items)
            headIdentifier &+= UInt32(truncatingIfNeeded: end)
            return rest
        }
        let out = Array(items[head..<end])
        headIdentifier &+= UInt32(truncatingIfNeeded: end - head)
        head = end
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 4096 && head * 2 > items.count {
            items.removeSubrange(0..<head)
            head = 0
        }
        return out
    }

    /// What an error response means for the window; empties it.
    ///
    /// If the identifier is not in flight (a stale or malformed response), no
    /// one can be told apart: everything is returned in ``WindowResolution/resend``
    /// with ``WindowResolution/identifierMatched`` false, and the caller should
    /// count it as an ambiguous loss.
    public mutating func resolve(_ response: ErrorResponse) -> WindowResolution<Item> {
        var r = WindowResolution<Item>(accepted: [], rejected: nil, resend: [], identifierMatched: false)
        guard let i = index(of: response.identifier) else {
            r.resend = take(upTo: items.count)
            return r
        }
        r.identifierMatched = true
        if response.status == .shutdown || response.status == .noErrors {
            r.accepted = take(upTo: i + 1)
        } else {
            r.accepted = take(upTo: i)
            // `take` may have compacted the storage: the failed item is now at `head`.
            r.rejected = (take(upTo: head + 1)[0], response.status)
        }
        r.resend = take(upTo: items.count)
        return r
    }

    /// The connection closed with no error response: returns everything in
    /// flight, to be resent; empties the window.
    public mutating func connectionLost() -> [Item] {
        take(upTo: items.count)
    }

    /// Starts a new connection: identifiers begin again at `firstIdentifier`.
    /// Returns anything still in flight (normally nothing: resolve or lose the old connection first).
    public mutating func reset(firstIdentifier: UInt32? = nil) -> [Item] {
        let left = take(upTo: items.count)
        if let firstIdentifier { self.firstIdentifier = firstIdentifier }
        headIdentifier = self.firstIdentifier
        nextIdentifier = self.firstIdentifier
        return left
    }
}

extension InFlightWindow: Sendable where Item: Sendable {}

/// How an error response splits an ``InFlightWindow``.
public struct WindowResolution<Item> {
    /// Written before the failed notification (or up to and including the last
    /// good one, for status 10): APNs took them.
    public var accepted: [Item]
    /// The notification the response names, with its status (not for status 10 or 0).
    public var rejected: (item: Item, status: Status)?
    /// Written after it: APNs discarded them; send them again, in this order, on a new connection.
    public var resend: [Item]
    /// Whether the response's identifier was in flight. When false, `resend`
    /// holds the whole window and nothing is known about it.
    public var identifierMatched: Bool
}
