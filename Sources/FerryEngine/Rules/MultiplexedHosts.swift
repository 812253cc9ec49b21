import Foundation
import Synchronization

/// The hosts whose last answer came over HTTP/2: their items share one connection as streams, and the
/// scheduler counts such a host as one connection however many of its items run (`ConcurrencyCaps.streams`).
/// A host that answers over HTTP/1.x again leaves the set.
final class MultiplexedHosts: Sendable {
    private let hosts = Mutex<Set<String>>([])

    /// `host` as `TransferSpec.host` spells it (lowercased). Returns whether the set changed.
    @discardableResult
    func record(_ host: String, multiplexed: Bool) -> Bool {
        hosts.withLock { hosts in
            multiplexed ? hosts.insert(host).inserted : hosts.remove(host) != nil
        }
    }

    var current: Set<String> {
        hosts.withLock { $0 }
    }
}
