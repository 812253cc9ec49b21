import FerryCore
import FerryTUI
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Opens the terminal UI on the queue (after adding `specs`), or says why it cannot.
enum TerminalUIRun {
    /// The UI runs unless --no-tui was given or stdin/stdout is not a terminal.
    static func wanted(noTUI: Bool) -> Bool {
        !noTUI && isatty(STDOUT_FILENO) != 0 && isatty(STDIN_FILENO) != 0
    }

    static func run(configuration: EngineConfiguration, adding specs: [TransferSpec]) async -> Never {
        let environment = ProcessInfo.processInfo.environment
        setlocale(LC_ALL, "")
        do {
            try TerminalApp.checkTerminal(environment["TERM"])
        } catch {
            printError(error.description)
            exit(2)
        }
        let manager: TransferManager
        do {
            manager = try makeTransferManager(configuration: configuration)
        } catch {
            printError("cannot start: \(error)")
            exit(1)
        }
        let ids = specs.map { manager.add($0) }
        let options = TerminalApp.Options(
            downloadDirectory: FileManager.default.currentDirectoryPath,
            colorAllowed: (environment["NO_COLOR"] ?? "").isEmpty,  // https://no-color.org
            term: environment["TERM"])
        // (Typed throws across MainActor.run crashes the 6.3.1 compiler: the error comes back as a value.)
        let failure = await MainActor.run { () -> String? in
            do {
                _ = try TerminalApp.launch(manager: manager, options: options, select: ids.first)
                return nil
            } catch {
                return String(describing: error)
            }
        }
        if let failure {
            manager.shutdown()
            printError(failure)
            exit(2)
        }
        // The app runs on the main queue from here and ends the process itself.
        while true { try? await Task.sleep(for: .seconds(3600)) }
    }
}
