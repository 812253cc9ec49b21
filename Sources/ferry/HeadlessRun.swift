import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Runs transfers without a UI: progress on stderr (a line per item at most once a second, plus one per state
/// change), results on stdout. Plain lines only: no escape sequences ever reach stderr.
final class HeadlessRun: Sendable {
    private let configuration: EngineConfiguration
    private let lastPrinted = Mutex<[TransferID: Int64]>([:])
    private let lastAttemptShown = Mutex<[TransferID: Int]>([:])
    private let output = DispatchQueue(label: "ferry.output")

    init(configuration: EngineConfiguration) {
        self.configuration = configuration
    }

    /// What the engine works on: `specs` are added to the queue, and the run waits for them and for any
    /// items handed over by another ferry meanwhile (plus, with `includeQueued`, everything already queued).
    /// Returns the exit status: 0 when every waited-for item succeeded, 1 otherwise.
    func run(_ specs: [TransferSpec], store: any QueueStore, directory: StateDirectory?, lock: EngineLock?,
             includeQueued: Bool = false) async -> Int32 {
        let manager: TransferManager
        do {
            manager = try TransferManager(configuration: configuration, store: store) { [weak self] event in self?.report(event) }
        } catch {
            printError("cannot load the queue: \(error)")
            return 1
        }
        let stop = installSignalHandlers(manager)
        let ticker = DispatchSource.makeTimerSource(queue: output)
        ticker.schedule(deadline: .now() + 1, repeating: 1)
        ticker.setEventHandler { [weak self] in self?.progress(manager.snapshot()) }
        ticker.resume()

        let handedOver = Mutex<Set<TransferID>>([])
        // Another `ferry get/put` on this state directory hands its items over through the store and pokes us.
        let wake = directory.flatMap { directory in
            try? WakeChannel(directory, queue: output) {
                let ids = manager.adoptNewItemsFromStore()
                handedOver.withLock { $0.formUnion(ids) }
            }
        }
        var waitFor = Set<TransferID>()
        if includeQueued {
            waitFor = Set(manager.snapshot().items.filter { !$0.state.isTerminal && $0.state != .paused }.map(\.id))
        }
        let own = manager.add(specs)
        waitFor.formUnion(own)
        // Items handed over while this engine ran are finished too before it exits.
        while true {
            await manager.waitUntilFinished(waitFor)
            let adopted = manager.adoptNewItemsFromStore()
            handedOver.withLock { $0.formUnion(adopted) }
            let more = handedOver.withLock { $0 }.subtracting(waitFor)
            if more.isEmpty { break }
            waitFor.formUnion(more)
        }
        ticker.cancel()
        withExtendedLifetime(wake) {}  // stop listening before the engine stops
        manager.shutdown()
        lock?.release()
        stop.forEach { $0.cancel() }
        output.sync {}

        var failed = 0
        let snapshot = manager.snapshot()
        let reported = includeQueued ? waitFor : Set(own)
        for item in snapshot.items where reported.contains(item.id) {
            if item.state == .completed, let path = item.savedPath {
                print(path)
            } else if item.state == .completed, item.spec.direction == .upload {
                writeResponseBody(item.response)
            } else {
                failed += 1
                let reason = item.lastError ?? item.state.rawValue
                printError("failed: \(TerminalSafe.redactedURL(item.spec.url)): \(TerminalSafe.sanitize(reason))")
            }
        }
        fflush(nil)
        if failed > 0 { printError("\(failed) of \(reported.count) transfers failed") }
        return failed > 0 ? 1 : 0
    }

    /// The server's answer to an upload, on stdout: raw when piped (so it can go on to jq), made
    /// terminal-safe when stdout is a terminal.
    private func writeResponseBody(_ response: ServerResponse?) {
        guard let response, !response.body.isEmpty else { return }
        if isatty(STDOUT_FILENO) != 0 {
            FileHandle.standardOutput.write(Data(TerminalSafe.sanitize(bytes: response.body, allowNewlines: true).utf8))
        } else {
            FileHandle.standardOutput.write(response.body)
        }
        if response.truncated {
            printError("the response body was cut at \(ByteFormat.bytes(Int64(response.body.count))) of \(ByteFormat.bytes(response.bodyLength))")
        }
    }

    private func report(_ event: TransferEvent) {
        let item = event.snapshot
        let name = TerminalSafe.sanitize(item.displayName)
        let line: String
        switch item.state {
        case .running:
            // One line per attempt: the engine also reports `running` while it checks and renames a finished file.
            guard let attempt = item.attempts.last,
                  lastAttemptShown.withLock({ $0.updateValue(attempt.number, forKey: item.id) }) != attempt.number
            else { return }
            line = attempt.fromOffset > 0
                ? "\(item.id) \(name): resuming at \(ByteFormat.bytes(attempt.fromOffset)) (attempt \(attempt.number))"
                : "\(item.id) \(name): \(item.spec.direction == .upload ? "uploading" : "downloading") (attempt \(attempt.number))"
        case .waiting:
            let wait = item.nextRetryAt.map { max(0, $0.timeIntervalSinceNow) } ?? 0
            line = "\(item.id) \(name): retry \(item.retries)/\(item.maxRetries) in \(ByteFormat.duration(wait.rounded(.up))): \(TerminalSafe.sanitize(item.lastError ?? ""))"
        case .completed where item.spec.direction == .upload:
            let status = item.response.map { " (HTTP \($0.status))" } ?? ""
            line = "\(item.id) \(name): done, \(ByteFormat.bytes(item.bytesDone)) sent\(status)"
        case .completed:
            line = "\(item.id) \(name): done, \(ByteFormat.bytes(item.bytesDone))"
        case .failed:
            line = "\(item.id) \(name): failed: \(TerminalSafe.sanitize(item.lastError ?? "unknown error"))"
        case .queued, .paused, .cancelled:
            line = "\(item.id) \(name): \(item.state.rawValue)"
        }
        output.async { printError(line) }
    }

    /// Called once a second on the output queue.
    private func progress(_ snapshot: QueueSnapshot) {
        for item in snapshot.items where item.state == .running {
            let changed = lastPrinted.withLock { last -> Bool in
                defer { last[item.id] = item.bytesDone }
                return last[item.id] != item.bytesDone
            }
            guard changed else { continue }
            var line = "\(item.id) \(TerminalSafe.sanitize(item.displayName)): "
            if let progress = item.progress, let total = item.bytesExpected {
                line += "\(Int(progress * 100))% \(ByteFormat.bytes(item.bytesDone))/\(ByteFormat.bytes(total))"
            } else {
                line += ByteFormat.bytes(item.bytesDone)
            }
            if let rate = item.bytesPerSecond { line += " \(ByteFormat.rate(rate))" }
            if let eta = item.eta { line += " ETA \(ByteFormat.duration(eta))" }
            printError(line)
        }
    }

    /// SIGINT/SIGTERM: stop every attempt, keep the `.part` files, exit 130/143.
    private func installSignalHandlers(_ manager: TransferManager) -> [DispatchSourceSignal] {
        [(SIGINT, Int32(130)), (SIGTERM, Int32(143))].map { signalNumber, code in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                printError("interrupted: stopping; partial files are kept")
                manager.shutdown(timeout: 5)
                exit(code)
            }
            source.resume()
            return source
        }
    }
}

func printError(_ line: String) {
    FileHandle.standardError.write(Data(("ferry: " + line + "\n").utf8))
}
