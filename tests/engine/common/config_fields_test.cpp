// Declared config fields: reading with defaults and checks, writing, the docs kvbench list
// shows; an added field leaves configs stored before it unchanged.
#include "engine/common/config_fields.h"

#include <gtest/gtest.h>

namespace kvb {
namespace {

struct Toy {
  int window = 8;
  int keys = 1;  // added later
  static const ConfigFields<Toy>& fields() {
    static const auto f = ConfigFields<Toy>()
                              .field("window", &Toy::window, "window", check::at_least(1))
                              .added_field("keys", &Toy::keys, "keys", check::at_least(1));
    return f;
  }
};

TEST(ConfigFields, AnAddedFieldIsWrittenOnlyAwayFromItsDefault) {
  const auto& f = Toy::fields();
  EXPECT_EQ(f.write(f.read(json::object(), "t")), (json{{"window", 8}}));
  EXPECT_EQ(f.write(f.read({{"keys", 1}}, "t")), (json{{"window", 8}}));
  EXPECT_EQ(f.write(f.read({{"keys", 3}}, "t")), (json{{"window", 8}, {"keys", 3}}));
  EXPECT_THROW(f.read({{"keys", 0}}, "t"), InputError);
  EXPECT_THROW(f.read({{"keys", "3"}}, "t"), InputError);
  const std::vector<FieldDoc> docs = f.docs();
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1].name, "keys");
  EXPECT_EQ(docs[1].default_value, "1");
  EXPECT_EQ(docs[0].default_value, "8");
}

// A field another one makes unused: set away from its default there, it is found (the run
// would ignore it); at its default, or where it is used, it is not; a member struct's rule
// holds in the config that includes it; an added field's default is its own; kvbench list says
// when it is unused; a rule naming no field is a programming error.
struct Pooled {
  int kernel = 7;
  std::string pooling = "max";
  int stride = 1;  // added later
  static const ConfigFields<Pooled>& fields() {
    static const auto f =
        ConfigFields<Pooled>()
            .field("kernel", &Pooled::kernel, "kernel")
            .field("pooling", &Pooled::pooling, "pooling")
            .added_field("stride", &Pooled::stride, "stride")
            .unused_when("pooling", [](const Pooled& p) { return p.kernel == 1; }, "kernel is 1")
            .unused_when("stride", [](const Pooled& p) { return p.kernel == 1; }, "kernel is 1");
    return f;
  }
};
struct Outer {
  Pooled pooled;
  static const ConfigFields<Outer>& fields() {
    static const auto f = ConfigFields<Outer>().fields_of(&Outer::pooled, Pooled::fields());
    return f;
  }
};

template <typename C>
std::string unused(const json& j) {
  const std::optional<UnusedField> u = C::fields().first_unused(C::fields().read(j, "t"));
  return u ? u->name + " " + u->value + " " + u->default_value + " " + u->when : "";
}

TEST(ConfigFields, AFieldSetWhereItIsUnusedIsFound) {
  EXPECT_EQ(unused<Pooled>({{"kernel", 1}, {"pooling", "avg"}}), "pooling \"avg\" \"max\" kernel is 1");
  EXPECT_EQ(unused<Pooled>({{"kernel", 1}, {"pooling", "max"}}), "");
  EXPECT_EQ(unused<Pooled>({{"kernel", 3}, {"pooling", "avg"}}), "");
  EXPECT_EQ(unused<Pooled>({{"kernel", 1}, {"stride", 2}}), "stride 2 1 kernel is 1");
  EXPECT_EQ(unused<Outer>({{"kernel", 1}, {"pooling", "avg"}}), "pooling \"avg\" \"max\" kernel is 1");
  EXPECT_EQ(unused<Outer>({{"kernel", 5}, {"pooling", "avg"}}), "");
  EXPECT_EQ(Outer::fields().docs()[1].doc, "pooling [unused when kernel is 1]");
  EXPECT_THROW(ConfigFields<Pooled>().unused_when("polling", [](const Pooled&) { return true; }, "x"),
               std::logic_error);
}

}  // namespace
}  // namespace kvb
