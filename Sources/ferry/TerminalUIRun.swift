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

    /// Opens the UI on the queue of the running engine (started in the background when none runs), after
    /// handing it `specs`.
    /// `netrcFile`: the netrc file items added in the UI use (the command line's choice).
    /// `tree`: the specs are a tree's, from there (Batch.tree).
    /// `walking`: a tree the engine walks and downloads (`get -r --tui`).
    static func run(_ common: CommonOptions, config: Config, adding specs: [TransferSpec] = [], walking job: TreeJob? = nil,
                    force: Bool = false, netrcFile: String?, tree: String? = nil) async -> Never {
        let environment = ProcessInfo.processInfo.environment
        setlocale(LC_ALL, "")
        do {
            try TerminalApp.checkTerminal(environment["TERM"])
        } catch {
            printError(error.description)
            exit(2)
        }
        // The UI is a client of the engine: the one running on this queue, or a background one started now.
        // Closing the terminal, an SSH drop or q detach the UI; the transfers go on.
        let client: ControlClient
        var ids: [TransferID] = []
        do {
            client = try EngineStartup.attach(common)
            if !specs.isEmpty { ids = try add(specs, to: client, force: force, tree: tree).items.map(\.id) }
            if let job { _ = try walk(job, with: client) }
        } catch {
            printError(String(describing: error))
            exit(error is UsageError ? 2 : 1)
        }
        // Every update from the engine wakes the UI, whose timer sleeps while nothing moves.
        let wakeup = TerminalWakeup()
        let app = AppSlot()
        let queue: RemoteQueue
        do {
            queue = try RemoteQueue(client: client, onChange: { wakeup.nudge() }, onClose: { reason, asked in
                DispatchQueue.main.async { MainActor.assumeIsolated { app.current?.engineGone(reason: reason, asked: asked) } }
            })
        } catch {
            printError("cannot follow the engine: \(error)")
            exit(1)
        }
        let cwd = FileManager.default.currentDirectoryPath
        let options = TerminalApp.Options(
            downloadDirectory: (try? InputValidation.writableDirectory(config.downloadDirectory, relativeTo: cwd)) ?? cwd,
            // https://no-color.org, unless the config says otherwise.
            colorAllowed: config.color == .always || (config.color == .auto && (environment["NO_COLOR"] ?? "").isEmpty),
            term: environment["TERM"],
            forceASCII: config.ascii == .auto ? nil : config.ascii == .always,
            framesPerSecond: config.refreshHz,
            netrcFile: netrcFile,
            sshAgent: common.sshAgent,
            bell: config.bell)
        // (Typed throws across MainActor.run crashes the 6.3.1 compiler: the error comes back as a value.)
        let failure = await MainActor.run { () -> String? in
            do {
                app.current = try TerminalApp.launch(queue: queue, options: options, select: ids.first, wakeup: wakeup)
                return nil
            } catch {
                return String(describing: error)
            }
        }
        if let failure {
            queue.detach()
            printError(failure)
            exit(2)
        }
        // The app runs on the main queue from here and ends the process itself.
        while true {
            try? await Task.sleep(for: .seconds(3600))
        }
    }
}

/// The app, once launched, for the engine's close callback (main actor).
@MainActor
final class AppSlot: Sendable {
    var current: TerminalApp?
    nonisolated init() {}
}
