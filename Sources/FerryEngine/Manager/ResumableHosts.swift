import Foundation
import Synchronization

/// What this engine learned of hosts' resumable-upload servers, for its later uploads to them (as long as it runs):
/// the ones that refused a grown chunk are sent the start size (UploadChunking); the ones seen to speak the IETF
/// draft (a `104` with a location) get a creation that carries the first chunk only (`Upload-Complete: ?0`), so a
/// cut of it costs one chunk even where the server keeps nothing of a cut request.
final class ResumableHosts: Sendable {
    private struct Facts {
        var refusingGrownChunks: Set<String> = []
        var speakingDraft: Set<String> = []
    }
    private let facts = Mutex(Facts())

    func refusesGrownChunks(_ host: String) -> Bool { facts.withLock { $0.refusingGrownChunks.contains(host) } }
    func refusedGrownChunk(_ host: String) { _ = facts.withLock { $0.refusingGrownChunks.insert(host) } }
    func speaksDraft(_ host: String) -> Bool { facts.withLock { $0.speakingDraft.contains(host) } }
    func spokeDraft(_ host: String) { _ = facts.withLock { $0.speakingDraft.insert(host) } }
}
