import Foundation
import Synchronization

/// An engine behind its control socket, as a QueueControl: snapshots are the client's copy of the queue
/// (kept in step by the engine's updates), and commands go out in order on a queue of their own, so a
/// front end never waits for the engine (only `enqueue` waits, for the new id).
public final class RemoteQueue: QueueControl {
    private let client: ControlClient
    private let outbox = DispatchQueue(label: "ferry.remote-commands")
    private let stopping = Atomic<Bool>(false)

    /// - Parameters:
    ///   - onChange: after each update (on the client's thread).
    ///   - onClose: the engine went away: why, and whether this front end had asked it to stop.
    public init(client: ControlClient, onChange: @escaping @Sendable () -> Void,
                onClose: @escaping @Sendable (_ reason: String, _ asked: Bool) -> Void) throws(ControlError) {
        self.client = client
        try client.subscribe(onUpdate: { _ in onChange() }, onClose: { [weak self] reason in
            onClose(reason, self?.stopping.load(ordering: .relaxed) ?? false)
        })
    }

    public func snapshot() -> QueueSnapshot { client.snapshot }

    private func send(_ verb: ControlVerb, ids: [TransferID] = [], _ fill: @escaping @Sendable (inout ControlRequest) -> Void = { _ in }) {
        var request = ControlRequest(id: 0, verb: verb)
        if !ids.isEmpty { request.ids = ids.map(\.rawValue) }
        fill(&request)
        outbox.async { [client, request] in _ = try? client.request(request) }
    }

    public func enqueue(_ spec: TransferSpec) -> TransferID? {
        var request = ControlRequest(id: 0, verb: .add)
        request.specs = [spec]
        // After the commands before it.
        return outbox.sync { (try? client.request(request))?.ids?.first.map(TransferID.init) }
    }

    public func pause(_ id: TransferID) { send(.pause, ids: [id]) }
    public func resume(_ id: TransferID) { send(.resume, ids: [id]) }
    public func cancel(_ id: TransferID) { send(.cancel, ids: [id]) }
    public func retry(_ id: TransferID) { send(.retry, ids: [id]) }
    public func remove(_ id: TransferID, deletePartial: Bool) { send(.remove, ids: [id]) { $0.deletePart = deletePartial } }
    public func move(_ id: TransferID, _ direction: QueueMove) { send(.move, ids: [id]) { $0.move = direction } }
    public func setConcurrency(maxConcurrent: Int) { send(.jobs) { $0.count = maxConcurrent } }

    public func pauseAll() {
        let ids = snapshot().items.filter(\.state.isPending).map(\.id)
        if !ids.isEmpty { send(.pause, ids: ids) }
    }

    public func resumeAll() {
        let ids = snapshot().items.filter { $0.state == .paused }.map(\.id)
        if !ids.isEmpty { send(.resume, ids: ids) }
    }

    @discardableResult
    public func setRateLimit(_ id: TransferID, _ rate: Int64?) -> Bool {
        send(.limit, ids: [id]) { $0.rate = rate }
        return true
    }

    public func setGlobalLimits(download: Int64?, upload: Int64?) {
        send(.limits) {
            $0.download = download
            $0.upload = upload
        }
    }

    /// Leaves the engine running: the commands sent so far go out first.
    public func detach() {
        outbox.sync {}
        client.close()
    }

    public func stopEngine() {
        stopping.store(true, ordering: .relaxed)
        outbox.sync { _ = try? client.request(ControlRequest(id: 0, verb: .stop)) }
    }
}
