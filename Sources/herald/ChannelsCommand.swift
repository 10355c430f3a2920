import ArgumentParser
import HeraldCore
import HeraldHTTP2
import HeraldHTTP2Transport
import HeraldJSON
import HeraldKit

/// `herald channels`: APNs' broadcast channels (iOS 18 Live Activities).
struct ChannelsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channels",
        abstract: "Create, list, read and delete broadcast channels (iOS 18 Live Activities).",
        discussion: """
            Talks to APNs' channel management API with the credentials of the configuration's \
            http2 transport (provider token or certificate, trust, proxy). The endpoint is the \
            environment's api-manage-broadcast host (port 2196 in production, 2195 in the sandbox), \
            or the transport's channelsHost/channelsPort, or its host and port when it names them \
            (herald simulate --http2 serves channels on its one port). Prints one JSON line per \
            channel.

            A broadcast push names the channel instead of a token:
              {"channel-id":"<id>","topic":"com.example.app","event":"update","content-state":{…},"timestamp":1700000000}

            Examples:
              herald channels create --config herald.json --bundle-id com.example.app --storage-policy 1
              herald channels list --config herald.json --bundle-id com.example.app
              herald channels read --config herald.json --bundle-id com.example.app --channel-id dHN0LXNyY2gtY2hubA==
              herald channels delete --config herald.json --bundle-id com.example.app --channel-id dHN0LXNyY2gtY2hubA==
            """,
        subcommands: [Create.self, List.self, Read.self, Delete.self]
    )

    struct Options: ParsableArguments {
        @Option(help: "Configuration file (JSON) with an http2 transport.")
        var config: String

        @Option(help: "The app's bundle identifier (default: the transport's topic).")
        var bundleId: String?

        @Option(help: "With an apps configuration: the app whose transport (credentials, endpoint) to use (default: the one whose topics hold --bundle-id).")
        var app: String?

        @Option(help: "Seconds to wait for each answer.")
        var timeout = 30

        /// Runs `request` and prints what came back.
        func run(_ request: (String) -> BroadcastChannelRequest) async throws {
            let configuration = try loadConfiguration(config)
            var (type, options, appTopic) = (configuration.transportType, configuration.transportOptions, String?.none)
            if !configuration.apps.isEmpty {
                let names = configuration.apps.map(\.name).joined(separator: ", ")
                let chosen = app.map { a in configuration.apps.first { $0.name == a } }
                    ?? bundleId.flatMap { b in configuration.apps.first { $0.topics.contains(b) } }
                guard let chosen else {
                    throw SetupError("\(config): with apps, give --app (one of \(names)), or a --bundle-id one of them has in its topics")
                }
                (type, options, appTopic) = (chosen.transportType, chosen.transportOptions, chosen.topics.first)
            } else if let app {
                throw SetupError("\(config): --app \(app): the configuration has no apps section")
            }
            guard type == "http2" else {
                throw SetupError("\(config): herald channels needs transport.type \"http2\" (the configuration has \"\(type)\")")
            }
            let client: APNsChannelClient
            let bundle: String
            do {
                let c = try HTTP2TransportFactory.channelsConfiguration(options)
                guard let b = bundleId ?? c.defaultTopic ?? appTopic, !b.isEmpty else {
                    throw SetupError("give --bundle-id, or a topic in the configuration's transport")
                }
                bundle = b
                client = try APNsChannelClient(configuration: c, timeout: .seconds(max(1, timeout)))
            } catch let e as SetupError {
                throw e
            } catch {
                throw SetupError("\(error)")
            }
            let result: BroadcastChannelResult
            do { result = try await client.call(request(bundle)) } catch {
                throw SetupError("\(client.configuration.host):\(client.configuration.port): \(error)")
            }
            var out: [UInt8] = []
            func line(_ id: String, _ fill: (inout JSONWriter) -> Void = { _ in }) {
                var w = JSONWriter(capacity: 96)
                w.raw("{\"channelId\":")
                w.string(id)
                fill(&w)
                w.raw("}\n")
                out += w.bytes
            }
            switch result {
            case .created(let c):
                line(c.id) { $0.raw(",\"created\":true") }
            case .channel(let c):
                line(c.id) { w in
                    if let p = c.storagePolicy { w.raw(",\"storagePolicy\":"); w.int(p) }
                    if let t = c.pushType { w.raw(",\"pushType\":"); w.string(t) }
                }
            case .deleted:
                if case .delete(_, let id) = request(bundle) { line(id) { $0.raw(",\"deleted\":true") } }
            case .channels(let ids):
                for id in ids { line(id) }
            }
            try writeAll(1, &out, to: "standard output")
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a channel; prints its id.")
        @OptionGroup var options: Options
        @Option(help: "0: APNs stores no message for offline devices; 1: it keeps the most recent.")
        var storagePolicy = 0

        func validate() throws {
            guard BroadcastChannelRequest.storagePolicies.contains(storagePolicy) else {
                throw ValidationError("--storage-policy must be 0 or 1")
            }
        }

        func run() async throws {
            let policy = storagePolicy
            try await options.run { .create(bundleID: $0, storagePolicy: policy) }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the app's channels, one JSON line each.")
        @OptionGroup var options: Options
        func run() async throws { try await options.run { .list(bundleID: $0) } }
    }

    struct Read: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a channel's storage policy and push type.")
        @OptionGroup var options: Options
        @Option(help: "The channel's id.")
        var channelId: String
        func run() async throws {
            let id = channelId
            try await options.run { .read(bundleID: $0, channelID: id) }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel.")
        @OptionGroup var options: Options
        @Option(help: "The channel's id.")
        var channelId: String
        func run() async throws {
            let id = channelId
            try await options.run { .delete(bundleID: $0, channelID: id) }
        }
    }
}
