import ArgumentParser
// Links jemalloc, which then serves every malloc and free in the process (docs/architecture.md,
// "The allocator"); `herald bench send` reports which allocator a run had.
import CJemalloc
import HeraldBenchmarks
#if canImport(Glibc)
import Glibc
#endif

/// What `herald --version` prints.
let heraldVersion = "0.3.0"

@main
struct Herald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "An Apple Push Notification service provider.",
        version: heraldVersion,
        subcommands: [
            Send.self, ValidateCommand.self, PayloadCommand.self, FrameCommand.self, DecodeCommand.self, FeedbackCommand.self, SimulateCommand.self, ChannelsCommand.self, TokensCommand.self, InspectCommand.self, ReplayCommand.self, ServeCommand.self,
            EnqueueCommand.self, WorkCommand.self, PruneCommand.self,
            CertsCommand.self,
            Bench.self,
        ]
    )

    /// A closed pipe or a full disk is a write error, reported and reflected
    /// in the exit status, never a silent death by SIGPIPE.
    static func main() async {
        signal(SIGPIPE, SIG_IGN)
        await main(nil)
    }
}
