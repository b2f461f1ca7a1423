import CountdownStoreCore
import Foundation

/// The raw values of an enumeration's cases as C strings that live as long as the process, for
/// binding without a copy (see ``SQLiteBindings/add(_:from:)``).
final class ConstantTexts<Value: RawRepresentable & Hashable>: @unchecked Sendable where Value.RawValue == String {
    // `@unchecked Sendable`: the table is written once, in `init`, and only read after; the texts
    // it points to are never freed or changed.
    private let texts: [Value: UnsafePointer<CChar>]

    init(_ cases: some Sequence<Value>) {
        texts = Dictionary(uniqueKeysWithValues: cases.map { ($0, UnsafePointer(strdup($0.rawValue)!)) })
    }

    func text(for value: Value) -> UnsafePointer<CChar>? {
        texts[value]
    }
}

extension ConstantTexts where Value == CountdownKind {
    static let kinds = ConstantTexts(CountdownKind.allCases)
}

extension ConstantTexts where Value == CountdownPolicy {
    static let policies = ConstantTexts(CountdownPolicy.allCases)
}

extension ConstantTexts where Value == CountdownState {
    static let states = ConstantTexts(CountdownState.allCases)
}

extension ConstantTexts where Value == CountdownRule {
    static let rules = ConstantTexts(CountdownRule.allCases)
}
