import FerryCore
import Foundation
import NIOCore
import NIOWebSocket
import Synchronization

/// aria2's notifications for WebSocket clients, from the engine's events: `aria2.onDownloadStart` when an
/// item starts running, `onDownloadPause` when it is paused, `onDownloadStop` when it is cancelled (aria2's
/// remove), `onDownloadComplete` and `onDownloadError` when it ends; params `[{"gid": ...}]`, no id. Only
/// changes of state are told (an item's other changes, its progress, are not). A client with more than
/// `RPCServer.writeLimit` unread is dropped: the engine never waits for one.
public final class Aria2Notifier: Sendable {
    private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])
    private let states = Mutex<[TransferID: TransferState]>([:])

    public init() {}

    /// The engine's event listener (on its event queue, in order).
    public func observe(_ event: TransferEvent) {
        // Only the id and the state go into the lock's closure (the event, with its snapshot, is large).
        let (id, state) = (event.id, event.state)
        let before = states.withLock { states -> TransferState? in
            let before = states[id]
            states[id] = state.isTerminal ? nil : state
            return before
        }
        guard before != state, let method = Self.method(for: state) else { return }
        notify(method, gid: Aria2RPC.gid(id))
    }

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
