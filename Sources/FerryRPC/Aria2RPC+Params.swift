import FerryCore
import Foundation

/// aria2's parameters: GIDs (whole or a prefix), keys, option objects, numbers and rates as clients send them.
extension Aria2RPC {
    struct Params {
        var values: [Any]
        /// The items whose GIDs begin with a prefix (two at most: enough to tell that it names more than one).
        let matching: (String) -> [TransferID]
        init(_ values: [Any], matching: @escaping (String) -> [TransferID] = { _ in [] }) {
            self.values = values
            self.matching = matching
        }

        /// The GID first in the parameters: 16 hex digits, or fewer that begin exactly one item's GID.
        mutating func gid() throws -> TransferID {
            guard let text = values.first as? String, (1...16).contains(text.count), text.allSatisfy(\.isHexDigit),
                  let raw = UInt64(text, radix: 16) else {
                throw Failure("a GID is up to 16 hex digits")
            }
            values.removeFirst()
            guard text.count < 16 else {
                guard raw <= UInt64(Int64.max) else { throw Failure("GID \(text) is not found") }
                return TransferID(Int64(raw))
            }
            let found = matching(text.lowercased())
            guard found.count == 1 else {
                throw Failure(found.isEmpty ? "GID \(text) is not found" : "GID \(text) is ambiguous: it begins more than one GID")
            }
            return found[0]
        }

        /// The GID first in the parameters, an item's or a tree's (whole: a tree's GID has its top bit set).
        mutating func target() throws -> Target {
            if let text = values.first as? String, text.count == 16, let raw = UInt64(text, radix: 16), raw & Aria2RPC.treeBit != 0 {
                values.removeFirst()
                return .tree(Int64(bitPattern: raw & ~Aria2RPC.treeBit))
            }
            return .item(try gid())
        }

        func keys() -> [String]? { values.first as? [String] }

        mutating func object() throws -> [String: Any] {
            guard let object = values.first as? [String: Any] else { throw Failure("options are an object") }
            values.removeFirst()
            return object
        }
    }

    /// A number given as a number or as text (aria2 clients send both).
    static func int(_ value: Any) -> Int? {
        if let n = value as? Int { return n }
        if let text = value as? String { return Int(text) }
        return nil
    }

    /// aria2's rate options: "0" for none, a plain number of bytes, or "1M" and the like.
    static func rate(_ value: Any, option: String) throws -> Int64? {
        let text = "\(value)".trimmingCharacters(in: .whitespaces)
        if let plain = Int64(text) {
            guard plain >= 0 else { throw Failure("\(option): a rate cannot be negative") }
            return plain == 0 ? nil : plain
        }
        do throws(UsageError) {
            return try RateText.parse(text)
        } catch {
            throw Failure("\(option): \(error.description)")
        }
    }
}
