import FerryCore
import Foundation
import NIOCore
import NIOWebSocket
import Synchronization

/// aria2's notifications for WebSocket clients, from the engine's events, as aria2 sends them: params
/// `[{"gid": ...}]`, no id, once per change of what the client shows.
/// - `aria2.onDownloadStart` when an item starts: not when it goes on after a retry's wait (aria2 retries
///   within one start);
/// - `onDownloadPause` and `onDownloadStop` (aria2's remove: ferry's cancel) only for an item that was
///   active, running or waiting for a retry (aria2 says nothing when a waiting item is paused or removed);
/// - `onDownloadComplete` and `onDownloadError` when it ends, once (the engine tells each transition once).
/// A client with more than `RPCServer.writeLimit` unread is dropped: the engine never waits for one.
public final class Aria2Notifier: TransferMonitor {
    private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])
    /// The items that are active (running, or waiting for a retry, or queued between a retry's wait and its
    /// next run): a start is told when an item becomes active, a pause or a remove only of an active one.
    private let active = Mutex<Set<TransferID>>([])

    public init() {}

    /// Told on the engine's event queue, in order. The engine tells each transition once, so an end is told once
    /// whatever its ranges told.
    public func transitioned(_ item: TransferSnapshot, from before: TransferState) {
        // Only the id and the state go into the lock's closure (the snapshot is large).
        let (id, state) = (item.id, item.state)
        let method = active.withLock { active -> String? in
            let wasActive = active.contains(id)
            switch state {
            case .running, .waiting:
                active.insert(id)
                return state == .running && !wasActive ? "aria2.onDownloadStart" : nil
            case .queued:
                // Between a retry's wait (or a probe of ranges) and the next run, the item stays in the start it
                // was told of; an item queued again after an end or a pause is told when it starts.
                return nil
            case .paused:
                active.remove(id)
                return wasActive ? "aria2.onDownloadPause" : nil
            case .cancelled, .completed, .failed:
                active.remove(id)
                if state == .cancelled, !wasActive { return nil }
                return Self.method(for: state)
            }
        }
        guard let method else { return }
        notify(method, gid: Aria2RPC.gid(id))
    }

    /// A removed item is active no more (aria2 tells nothing of a remove).
    public func removed(_ id: TransferID) { _ = active.withLock { $0.remove(id) } }

    /// Items this notifier counts as active (the tests').
    var activeCount: Int { active.withLock { $0.count } }

    static func method(for state: TransferState) -> String? {
        switch state {
        case .running: "aria2.onDownloadStart"
        case .paused: "aria2.onDownloadPause"
        case .cancelled: "aria2.onDownloadStop"
        case .completed: "aria2.onDownloadComplete"
        case .failed: "aria2.onDownloadError"
        case .queued, .waiting: nil
        }
    }

    func notify(_ method: String, gid: String) {
        let message: [String: Any] = ["jsonrpc": "2.0", "method": method, "params": [["gid": gid]]]
        guard let data = try? JSONSerialization.data(withJSONObject: message) else { return }
        for channel in channels.withLock({ Array($0.values) }) {
            guard channel.isWritable else {
                // It stopped reading: dropped, not waited for.
                channel.close(promise: nil)
                continue
            }
            var buffer = channel.allocator.buffer(capacity: data.count)
            buffer.writeBytes(data)
            channel.writeAndFlush(WebSocketFrame(fin: true, opcode: .text, data: buffer), promise: nil)
        }
    }

    /// WebSocket clients connected now.
    var clients: Int { channels.withLock { $0.count } }

    func add(_ channel: any Channel) {
        channels.withLock { $0[ObjectIdentifier(channel)] = channel }
    }

    func remove(_ channel: any Channel) {
        _ = channels.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
    }
}
