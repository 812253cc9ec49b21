import CCurl
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// Carries every http(s) request of ferry's URLSession: libcurl's multi interface, driven by one thread of
/// our own that waits with `curl_multi_poll`, under `FerryURLProtocol`.
///
/// URLSession's own transport (corelibs' `_MultiHandle`) keeps a dispatch write source on a socket once
/// libcurl has asked to write to it, and never removes it when libcurl then asks to read only; an idle
/// socket is always writable, so a transfer waiting for data keeps a core busy (docs/transport.md).
/// `curl_multi_poll` asks libcurl afresh on every wait which sockets to watch and for what.
final class CurlTransport: @unchecked Sendable {
    /// The process's transport (one thread, one connection cache for every session).
    static let shared = CurlTransport()

    /// libcurl reads at most this much per call (its default is 16 KiB: 65,536 calls per GiB).
    static let receiveBufferSize = 256 << 10
    /// And sends at most this much per read of the body.
    static let sendBufferSize = 512 << 10

    enum Command {
        case start(CurlTransfer)
        case stop(CurlTransfer)
        case unpause(CurlTransfer)
    }

    private let commands = Mutex<[Command]>([])
    /// Touched only on the transport's thread.
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private let multi: UnsafeMutableRawPointer?
    /// Why libcurl cannot be used (nil when it can).
    let unavailable: String?

    private init() {
        if ferry_curl_load() != 0 {
            unavailable = ferry_curl_load_error().map { String(cString: $0) } ?? "libcurl cannot be loaded"
            multi = nil
            return
        }
        multi = ferry_curl_multi_init()
        unavailable = multi == nil ? "curl_multi_init failed" : nil
        guard multi != nil else { return }
        let thread = Thread { [self] in loop() }
        thread.name = "ferry.transport"
        thread.start()
    }

    /// libcurl's version line, e.g. "libcurl/7.88.1 OpenSSL/3.0.17 ...".
    static var libcurlVersion: String {
        guard ferry_curl_load() == 0, let version = ferry_curl_version() else { return "libcurl unavailable" }
        return String(cString: version)
    }

    func submit(_ command: Command) {
        commands.withLock { $0.append(command) }
        if let multi { _ = ferry_curl_multi_wakeup(multi) }
    }

    private func loop() {
        guard let multi else { return }
        while true {
            for command in commands.withLock({ c -> [Command] in defer { c.removeAll() }; return c }) {
                handle(command, multi)
            }
            var stillRunning: Int32 = 0
            _ = ferry_curl_multi_perform(multi, &stillRunning)
            for transfer in running.values where transfer.hasPendingBytes { transfer.flush() }
            var result: Int32 = 0
            while let easy = ferry_curl_multi_next_done(multi, &result) {
                guard let transfer = running.removeValue(forKey: easy) else { continue }
                _ = ferry_curl_multi_remove_handle(multi, easy)
                if let next = transfer.finished(result: Int(result)) {
                    attach(next, multi)
                }
            }
            // With nothing running there is nothing to time: sleep until a command wakes us.
            var ready: Int32 = 0
            _ = ferry_curl_multi_poll(multi, running.isEmpty ? 60_000 : 1_000, &ready)
        }
    }

    private func handle(_ command: Command, _ multi: UnsafeMutableRawPointer) {
        switch command {
        case let .start(transfer):
            attach(transfer, multi)
        case let .stop(transfer):
            if let easy = transfer.easy, running.removeValue(forKey: easy) != nil {
                _ = ferry_curl_multi_remove_handle(multi, easy)
            }
            transfer.stopped()
        case let .unpause(transfer):
            if let easy = transfer.easy, running[easy] != nil {
                _ = ferry_curl_easy_pause(easy, FERRY_CURLPAUSE_CONT)
            }
        }
    }

    /// Makes the transfer's next easy handle and adds it, or lets it fail at once (bad URL, body unreadable).
    private func attach(_ transfer: CurlTransfer, _ multi: UnsafeMutableRawPointer) {
        guard let easy = transfer.makeEasyHandle() else { return }
        if ferry_curl_multi_add_handle(multi, easy) == 0 {
            running[easy] = transfer
        } else {
            transfer.failToStart("libcurl refused the transfer")
        }
    }
}
