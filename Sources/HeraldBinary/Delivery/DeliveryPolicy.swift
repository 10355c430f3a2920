import HeraldCore

/// How a ``DeliveryMachine`` writes, confirms and gives up: the binary
/// interface's delivery rules, the same for the in-memory simulator and the
/// TLS gateway.
public struct DeliveryPolicy: Sendable, Hashable {
    /// Frames are gathered into writes of about this many bytes.
    public var writeBytes: Int = 64 << 10
    /// At most this many notifications wait for confirmation per connection
    /// (bounds memory and what an error can throw away). When reached, the
    /// connection writes a probe and waits for its answer.
    public var maxUnconfirmed: Int = 100_000
    /// After each rejection the limit above is set to about twice the mean
    /// distance between rejections (a running mean), not below this; it
    /// doubles with every clean probe. A probe ends its connection just as an
    /// error response does, so writing well past the usual distance costs a
    /// few resends where writing short of it would cost a reconnection.
    public var minUnconfirmed: Int = 32
    /// A connection asks for confirmation (writes a probe) once its oldest
    /// unconfirmed notification has waited this long.
    public var confirmAfter: Duration = .seconds(1)
    /// With nothing more to write, a connection waits this long for more work
    /// before it asks for confirmation (a probe ends the connection, so a
    /// steady stream with short gaps should not pay one per gap).
    public var idleConfirmAfter: Duration = .milliseconds(250)
    /// A probe unanswered for this long means the gateway stopped reading or
    /// answering (a stall): the connection is closed and what was in flight is
    /// treated as after a close with no answer.
    public var answerTimeout: Duration = .seconds(10)
    /// A connection that has not completed its TLS handshake after this long is given up.
    public var connectTimeout: Duration = .seconds(15)
    /// Reconnection delays after failures.
    public var backoff = BackoffPolicy()
    /// How long notifications are held through an outage: once the gateway
    /// has been unreachable (or has ended every connection with no answer)
    /// this long, what is queued fails, naming the outage and the last error;
    /// notifications that come later get one attempt each until a connection
    /// succeeds again. A restart of the gateway fails nothing.
    public var maxOutage: Duration = .seconds(300)
    /// Before any connection has completed its handshake: after this many
    /// attempts in a row have failed, what is queued fails at once
    /// (`gateway-unreachable`, naming the endpoint and the last error) instead
    /// of waiting out ``maxOutage``, and later notifications get one attempt
    /// each, made at once, until a connection succeeds. A run pointed at the
    /// wrong host or port ends in seconds. `nil`: hold through ``maxOutage``
    /// as after a connection was lost.
    public var firstConnectAttempts: Int? = 5
    /// How many times a notification may be alone in flight on a connection
    /// that closes with no answer before it ends `failed`: only a notification
    /// that the gateway keeps closing on, alone, while it answers for others
    /// in between (else a probe alone asks whether the gateway answers at
    /// all), is given up. A probe's answer can be lost too: with one answer in
    /// 50 lost, six in a row happen about once in 15 billion.
    public var maxSilentCloses: Int = 6

    public init() {}
}
