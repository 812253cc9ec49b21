import ArgumentParser
import FerryCore
import Foundation

@main
struct Ferry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry",
        abstract: "A terminal upload/download manager with resume, retries and a durable queue.",
        subcommands: [Get.self, Put.self]
    )

    @OptionGroup var common: CommonOptions

    /// No subcommand: the terminal UI on the queue.
    func run() async throws {
        guard TerminalUIRun.wanted(noTUI: common.noTUI) else {
            throw UsageError("the queue UI needs a terminal; use ferry get/put with --no-tui to run headless")
        }
        await TerminalUIRun.run(configuration: common.engineConfiguration(), adding: [])
    }

    /// Usage errors exit 2 (ArgumentParser's default is 64); everything else keeps its code.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as UsageError {
            FileHandle.standardError.write(Data("ferry: \(error.description)\n".utf8))
            Foundation.exit(2)
        } catch {
            let code = exitCode(for: error)
            if code == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

/// Options every subcommand takes.
struct CommonOptions: ParsableArguments {
    @Option(name: .customLong("state-dir"), help: "Where the queue is kept (default: $FERRY_STATE_DIR, else ~/.local/state/ferry).")
    var stateDir: String?

    @Flag(name: .customLong("no-tui"), help: "Run without the terminal UI (implied when stdout is not a terminal).")
    var noTUI = false

    @Option(name: .customShort("j"), help: "Transfers at once (default 4).")
    var jobs: Int?

    @Option(name: .customLong("retries"), help: "Retries after a failed attempt (default 5).")
    var retries: Int?

    func validate() throws {
        if let jobs, jobs < 1 { throw ValidationError("-j needs a number of 1 or more, got \(jobs)") }
        if let retries, retries < 0 { throw ValidationError("--retries needs 0 or more, got \(retries)") }
    }

    func engineConfiguration() -> EngineConfiguration {
        var configuration = EngineConfiguration()
        if let jobs { configuration.maxConcurrent = jobs }
        if let retries { configuration.retry.maxRetries = retries }
        return configuration
    }
}
