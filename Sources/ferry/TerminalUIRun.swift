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

    /// Becomes the engine for the state directory and opens the UI on its whole queue; when another ferry
    /// already works on it, new items are handed to it instead (a bare `ferry` says who has the queue).
    static func run(_ common: CommonOptions, config: Config, adding specs: [TransferSpec]) async -> Never {
        let environment = ProcessInfo.processInfo.environment
        setlocale(LC_ALL, "")
        do {
            try TerminalApp.checkTerminal(environment["TERM"])
        } catch {
            printError(error.description)
            exit(2)
        }
        let lock: EngineLock
        let store: SQLiteQueueStore
        do {
            switch try EngineStartup.begin(common, specs: specs) {
            case let .handedOff(pid, ids):
                if specs.isEmpty {
                    printError("another ferry\(pid.map { " (pid \($0))" } ?? "") is working on this queue; `ferry list` shows it")
                    exit(1)
                }
                EngineStartup.reportHandoff(pid: pid, ids: ids)
                exit(0)
            case let .engine(engineLock, queueStore, _):
                lock = engineLock
                store = queueStore
            }
        } catch {
            printError(error.description)
            exit(2)
        }
        let manager: TransferManager
        // Every engine change (an item handed over by another ferry, a retry timer firing, a transfer ending) wakes
        // the UI, whose timer sleeps while nothing moves.
        let wakeup = TerminalWakeup()
        do {
            manager = try TransferManager(configuration: common.engineConfiguration(config), store: store,
                                          onEvent: { _ in wakeup.nudge() })
        } catch {
            printError("cannot load the queue: \(error)")
            exit(1)
        }
        let ids = manager.add(specs)
        // Another `ferry get/put` on this state directory hands its items over through the store.
        let wake = try? WakeChannel(common.stateDirectory, queue: DispatchQueue(label: "ferry.wake")) {
            manager.adoptNewItemsFromStore()
        }
        let cwd = FileManager.default.currentDirectoryPath
        let options = TerminalApp.Options(
            downloadDirectory: (try? InputValidation.writableDirectory(config.downloadDirectory, relativeTo: cwd)) ?? cwd,
            // https://no-color.org, unless the config says otherwise.
            colorAllowed: config.color == .always || (config.color == .auto && (environment["NO_COLOR"] ?? "").isEmpty),
            term: environment["TERM"],
            forceASCII: config.ascii == .auto ? nil : config.ascii == .always,
            framesPerSecond: config.refreshHz)
        // (Typed throws across MainActor.run crashes the 6.3.1 compiler: the error comes back as a value.)
        let failure = await MainActor.run { () -> String? in
            do {
                _ = try TerminalApp.launch(manager: manager, options: options, select: ids.first, wakeup: wakeup)
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
        // The app runs on the main queue from here and ends the process itself (the kernel drops the lock).
        while true {
            withExtendedLifetime((lock, wake)) {}
            try? await Task.sleep(for: .seconds(3600))
        }
    }
}
