import FerryCore
import Foundation
import Testing

/// An add's request and reply have short forms on the socket (a million URLs are one spec and the URLs; a
/// million new ids are one run): what arrives must be what was sent, whatever the mix.
@Suite struct AddWireTests {
    private func roundTrip<T: Codable>(_ value: T) throws -> (T, String) {
        let data = try JSONEncoder().encode(value)
        return (try JSONDecoder().decode(T.self, from: data), String(decoding: data, as: UTF8.self))
    }

    @Test func specsThatDifferOnlyInTheirURLTravelAsOneSpecAndTheURLs() throws {
        var template = TransferSpec(download: URL(string: "http://h/0")!, directory: "/d", headers: [HTTPHeader(name: "A", value: "b")])
        template.rateLimit = 5
        let specs = (0..<500).map { index -> TransferSpec in
            var spec = template
            spec.url = URL(string: "http://h/\(index)?q=\"x\"".addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed)!)!
            return spec
        }
        let addition = QueueCommand.Addition(specs: specs, batch: 7, typed: "ferry get -i list", force: true)
        let (back, text) = try roundTrip(addition)
        #expect(back == addition)
        #expect(text.contains("\"template\"") && !text.contains("\"specs\""))
        #expect(text.components(separatedBy: "\"headers\"").count == 2, "the spec is sent once")

        // One spec that differs otherwise: every spec whole.
        var mixed = specs
        mixed[250].directory = "/elsewhere"
        let other = QueueCommand.Addition(specs: mixed)
        let (otherBack, otherText) = try roundTrip(other)
        #expect(otherBack == other)
        #expect(otherText.contains("\"specs\"") && !otherText.contains("\"template\""))
        #expect(try roundTrip(QueueCommand.Addition(specs: [template])).0.specs == [template])
        #expect(try roundTrip(QueueCommand.Addition(specs: [])).0.specs.isEmpty)
        // `get --force` replaces; aria2's addUri (force alone) does not; replacing needs force.
        let replacing = QueueCommand.Addition(specs: [template], force: true, replaces: true)
        #expect(try roundTrip(replacing).0.replaces && !(try roundTrip(addition).0.replaces))
        #expect(!QueueCommand.Addition(specs: [template], replaces: true).replaces)
    }

    @Test func newItemsWithConsecutiveIdsAreOneRun() throws {
        var result = CommandResult()
        result.batch = 3
        var reused = AddedItem(id: TransferID(2), how: .resumed, before: .paused)
        reused.name = "a.bin"
        var done = AddedItem(id: TransferID(40), how: .alreadyDone, before: .completed)
        done.savedPath = "/d/b.bin"
        result.added = (10..<1_010).map { AddedItem(id: TransferID($0), how: .added) } + [reused]
            + (1_010..<1_020).map { AddedItem(id: TransferID($0), how: .added) } + [done, AddedItem(id: TransferID(5), how: .added),
                                                                                      AddedItem(id: TransferID(4), how: .added)]
        let (back, text) = try roundTrip(result)
        #expect(back == result)
        #expect(text.contains("[10,1000]") && text.contains("[1010,10]") && text.contains("[5,1]") && text.contains("[4,1]"))

        result.added = []
        #expect(try roundTrip(result).0 == result)
        result.added = nil
        #expect(try roundTrip(result).0 == result)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(CommandResult.self, from: Data(#"{"outcome":{"changed":[],"left":[]},"added":[[1,0]]}"#.utf8))
        }
    }
}
