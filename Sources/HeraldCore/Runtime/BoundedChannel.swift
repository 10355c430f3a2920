import Synchronization

/// A bounded, multi-producer, multi-consumer FIFO channel between two stages.
///
/// `send` suspends while `capacity` elements are buffered, which is how a slow
/// transport slows the source and memory stays flat. It does not react to task
/// cancellation: draining at shutdown must not drop what is already in flight.
/// Only the producing side closes a channel; a `send` after `close` returns `false`.
public final class BoundedChannel<Element: Sendable>: Sendable {
    struct State: ~Copyable {
        var buffer: [Element?]
        var head = 0
        var count = 0
        var closed = false
        /// Senders parked with their element; a receiver takes the element and resumes them.
        var waitingSenders: [(Element, UnsafeContinuation<Bool, Never>)] = []
        var waitingReceivers: [UnsafeContinuation<Element?, Never>] = []

        init(capacity: Int) { buffer = Array(repeating: nil, count: capacity) }

        /// Tries to place the element in `slot` without waiting; takes it out of `slot` when placed.
        mutating func offer(_ slot: inout Element?) -> SendResult {
            if closed { return .closed }
            if !waitingReceivers.isEmpty { return .handOver(waitingReceivers.removeFirst()) }
            if count < buffer.count {
                buffer[(head + count) % buffer.count] = slot.take()
                count += 1
                return .enqueued
            }
            return .full
        }

        /// Tries to take an element without waiting.
        mutating func take() -> TakeResult {
            if count > 0 {
                let e = buffer[head].take()!
                head = (head + 1) % buffer.count
                count -= 1
                if !waitingSenders.isEmpty {
                    let (pending, c) = waitingSenders.removeFirst()
                    buffer[(head + count) % buffer.count] = pending
                    count += 1
                    return .value(e, c)
                }
                return .value(e, nil)
            }
            if !waitingSenders.isEmpty {
                let (pending, c) = waitingSenders.removeFirst()
                return .value(pending, c)
            }
            return closed ? .finished : .empty
        }
    }

    enum SendResult { case enqueued, closed, full, handOver(UnsafeContinuation<Element?, Never>) }
    enum TakeResult { case value(Element, UnsafeContinuation<Bool, Never>?), finished, empty }

    let state: Mutex<State>
    public let capacity: Int

    public init(capacity: Int) {
        precondition(capacity > 0, "a channel needs room for at least one element")
        self.capacity = capacity
        self.state = Mutex(State(capacity: capacity))
    }

    /// Sends an element, waiting while the channel is full. Returns `false` if the channel was closed.
    ///
    /// The element is consumed: once it is in the channel the sender holds no
    /// reference to it, so a receiver that mutates it (a batch handed to the
    /// next stage) owns it uniquely and never copies it.
    @discardableResult
    public func send(_ element: consuming Element) async -> Bool {
        var slot: Element? = consume element
        switch state.withLock({ $0.offer(&slot) }) {
        case .enqueued: return true
        case .closed: return false
        case .handOver(let r): r.resume(returning: slot.take()); return true
        case .full:
            return await withUnsafeContinuation { (c: UnsafeContinuation<Bool, Never>) in
                let result: SendResult = state.withLock { s in
                    let r = s.offer(&slot)
                    if case .full = r { s.waitingSenders.append((slot.take()!, c)) }
                    return r
                }
                switch result {
                case .enqueued: c.resume(returning: true)
                case .closed: c.resume(returning: false)
                case .handOver(let r): r.resume(returning: slot.take()); c.resume(returning: true)
                case .full: break  // a receiver resumes us
                }
            }
        }
    }

    /// Receives the next element, or `nil` once the channel is closed and drained.
    public func receive() async -> Element? {
        switch state.withLock({ $0.take() }) {
        case .value(let e, let sender): sender?.resume(returning: true); return e
        case .finished: return nil
        case .empty:
            return await withUnsafeContinuation { (c: UnsafeContinuation<Element?, Never>) in
                let result: TakeResult = state.withLock { s in
                    let r = s.take()
                    if case .empty = r { s.waitingReceivers.append(c) }
                    return r
                }
                switch result {
                case .value(let e, let sender): sender?.resume(returning: true); c.resume(returning: e)
                case .finished: c.resume(returning: nil)
                case .empty: break  // a sender or close resumes us
                }
            }
        }
    }

    /// Closes the channel: receivers get what is buffered, then `nil`.
    public func close() {
        let receivers: [UnsafeContinuation<Element?, Never>] = state.withLock { s in
            s.closed = true
            let r = s.waitingReceivers
            s.waitingReceivers.removeAll()
            return r
        }
        for r in receivers { r.resume(returning: nil) }
    }

    /// Number of elements buffered now.
    public var bufferedCount: Int { state.withLock { $0.count } }
}
