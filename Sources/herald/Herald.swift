import ArgumentParser

@main
struct Herald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "herald",
        abstract: "An Apple Push Notification service provider.",
        subcommands: [
            Send.self, PayloadCommand.self, FrameCommand.self, DecodeCommand.self, FeedbackCommand.self, SimulateCommand.self,
            CertsCommand.self,
            Bench.self,
        ]
    )
}
