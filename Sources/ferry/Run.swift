import ArgumentParser
import FerryCore
import Foundation

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Work through the saved queue without a UI until nothing is left to do.",
        discussion: "Items that were running when ferry last stopped resume where their .part file ends. Paused, done and failed items stay as they are. Exit 0 when every item worked on succeeded, 1 when any failed."
    )

    @OptionGroup var common: CommonOptions

    func run() async throws {
        let config = try common.loadConfig()
        switch try EngineStartup.begin(common.stateDirectory) {
        case let .running(client):
            let pid = (try? client.request(ControlRequest(id: 0, verb: .list)))?.pid
            Output.error("ferry: the queue is already being worked on\(pid.map { " (pid \($0))" } ?? ""); `ferry` shows it\n")
            throw ExitCode.success
        case let .engine(lock, store):
            let exitCode = await common.headlessRun(config)
                .run([], store: store, directory: common.stateDirectory, lock: lock, includeQueued: true)
            throw ExitCode(exitCode)
        }
    }
}
