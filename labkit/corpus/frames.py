"""Event frames: what a news article is about, and how it is told.

A frame names its slots (filled from `lexicon`), and gives several templates
for the title, the lead sentence, detail sentences and the summary.  Every
slot the title and summary use is stated in the lead, so both are derivable
from the body -- which is what makes the tasks learnable by a tiny model.
Keywords are slot names, or literal words (prefixed with "=") that occur in
every lead template of the frame.

Slot specs: a lexicon kind ("city", "company", ...) or "int:LO:HI",
"dec:LO:HI" (one decimal), "pct:LO:HI" (one decimal, a percentage).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    category: str
    name: str
    slots: dict[str, str]
    titles: tuple[str, ...]
    leads: tuple[str, ...]
    details: tuple[str, ...]
    summaries: tuple[str, ...]
    keywords: tuple[str, ...]


def _f(category, name, slots, titles, leads, details, summaries, keywords) -> Frame:
    return Frame(category, name, slots, tuple(titles), tuple(leads), tuple(details), tuple(summaries), tuple(keywords))


FRAMES: tuple[Frame, ...] = (
    # ---------------------------------------------------------------- economy
    _f(
        "财经",
        "earnings",
        {"company": "company", "q": "int:1:4", "rev": "int:12:980", "pct": "pct:1:45", "profit": "dec:1:90"},
        [
            "{company}第{q}季度营收{rev}亿元 同比增长{pct}%",
            "{company}第{q}季度财报：营收{rev}亿元，增长{pct}%",
            "{company}发布财报 第{q}季度营收增{pct}%",
        ],
        [
            "{date}，{company}发布第{q}季度财报，当季实现营业收入{rev}亿元，同比增长{pct}%。",
            "{company}{date}披露第{q}季度财报，营业收入达到{rev}亿元，较去年同期增长{pct}%。",
        ],
        [
            "报告期内，公司净利润为{profit}亿元。",
            "财报显示，{product}业务是拉动增长的主要因素。",
            "公司表示，将继续加大在{city}等地的市场投入。",
        ],
        [
            "{company}第{q}季度营收{rev}亿元，同比增长{pct}%，净利润{profit}亿元，{product}业务贡献突出。",
            "{company}发布第{q}季度财报，营业收入{rev}亿元，同比增长{pct}%，增长主要来自{product}业务。",
        ],
        ["company", "=财报", "=营业收入", "product"],
    ),
    _f(
        "财经",
        "investment",
        {"company": "company", "amount": "int:5:300", "product": "product", "jobs": "int:300:8000"},
        [
            "{company}投资{amount}亿元在{city}建设{product}基地",
            "{amount}亿元！{company}{product}项目落户{city}",
            "{company}{city}{product}基地开工",
        ],
        [
            "{date}，{company}与{city}市政府签约，计划投资{amount}亿元建设{product}生产基地。",
            "{company}{date}宣布，将在{city}投资{amount}亿元新建{product}生产基地。",
        ],
        ["项目建成后预计可提供就业岗位{jobs}个。", "该基地预计明年年底投产。", "当地政府将在土地和人才方面给予支持。"],
        [
            "{company}将在{city}投资{amount}亿元建设{product}生产基地，预计提供{jobs}个就业岗位。",
            "{company}计划投资{amount}亿元在{city}新建{product}基地，建成后可带动就业{jobs}人。",
        ],
        ["company", "city", "product", "=投资"],
    ),
    _f(
        "财经",
        "cpi",
        {"month": "int:1:12", "pct": "dec:0:4", "food": "pct:-5:9"},
        [
            "{city}{month}月CPI同比上涨{pct}%",
            "{city}统计局：{month}月居民消费价格上涨{pct}%",
            "{month}月{city}物价同比涨{pct}%",
        ],
        [
            "{city}市统计局{date}发布数据，{month}月全市居民消费价格指数（CPI）同比上涨{pct}%。",
            "据{city}市统计局{date}消息，{month}月{city}居民消费价格指数（CPI）同比上涨{pct}%。",
        ],
        ["其中，食品价格同比变动{food}%。", "服务价格总体保持平稳。", "统计部门表示，全市物价运行总体平稳。"],
        [
            "{city}{month}月居民消费价格指数同比上涨{pct}%，其中食品价格变动{food}%，物价运行总体平稳。",
            "据{city}市统计局数据，{month}月全市CPI同比上涨{pct}%，食品价格同比变动{food}%。",
        ],
        ["city", "=统计局", "=居民消费价格指数"],
    ),
    _f(
        "财经",
        "acquisition",
        {"company": "company", "company2": "company", "amount": "dec:1:120", "share": "int:20:100"},
        [
            "{company}拟{amount}亿元收购{company2}",
            "{company}收购{company2}{share}%股权",
            "{amount}亿元！{company}宣布收购{company2}",
        ],
        [
            "{company}{date}晚间公告，拟以{amount}亿元现金收购{company2}{share}%的股权。",
            "{date}，{company}宣布以{amount}亿元收购{company2}{share}%股权。",
        ],
        [
            "交易完成后，{company2}将纳入公司合并报表范围。",
            "本次收购尚需股东大会审议通过。",
            "公司表示，此次收购有助于完善{product}产业布局。",
        ],
        [
            "{company}拟以{amount}亿元收购{company2}{share}%股权，交易尚需股东大会审议。",
            "{company}宣布以{amount}亿元收购{company2}{share}%股权，以完善{product}产业布局。",
        ],
        ["company", "company2", "=收购", "=股权"],
    ),
    _f(
        "财经",
        "trade",
        {"months": "int:2:11", "total": "int:200:9000", "pct": "pct:1:30", "export": "int:100:5000"},
        [
            "{city}前{months}个月进出口总额{total}亿元",
            "{city}外贸进出口同比增长{pct}%",
            "前{months}月{city}外贸增长{pct}%",
        ],
        [
            "据{city}海关{date}消息，今年前{months}个月，{city}外贸进出口总额达{total}亿元，同比增长{pct}%。",
            "{city}海关{date}发布，前{months}个月{city}进出口总额{total}亿元，同比增长{pct}%。",
        ],
        ["其中出口{export}亿元。", "{product}出口表现亮眼。", "民营企业进出口占比进一步提升。"],
        [
            "{city}前{months}个月外贸进出口总额{total}亿元，同比增长{pct}%，其中出口{export}亿元。",
            "据{city}海关消息，前{months}个月{city}进出口总额达{total}亿元，增长{pct}%，{product}出口亮眼。",
        ],
        ["city", "=海关", "=进出口"],
    ),
    # ------------------------------------------------------------------ tech
    _f(
        "科技",
        "launch",
        {"company": "company", "product": "product", "price": "int:999:19999", "gen": "int:2:9"},
        [
            "{company}发布第{gen}代{product}",
            "{company}第{gen}代{product}亮相{city} 售价{price}元",
            "{company}新款{product}发布 起售价{price}元",
        ],
        [
            "{date}，{company}在{city}举行发布会，正式推出第{gen}代{product}，起售价{price}元。",
            "{company}{date}在{city}发布第{gen}代{product}，起售价为{price}元。",
        ],
        [
            "新品在续航和性能方面均有明显提升。",
            "该产品将于下月起陆续上市。",
            "公司负责人{person}表示，新品研发历时两年。",
        ],
        [
            "{company}在{city}发布第{gen}代{product}，起售价{price}元，续航和性能有明显提升。",
            "{company}推出第{gen}代{product}，起售价为{price}元，将于下月上市。",
        ],
        ["company", "product", "city", "=起售价"],
    ),
    _f(
        "科技",
        "research",
        {"uni": "uni", "field": "field", "journal": "journal", "person": "person"},
        [
            "{uni}在{field}领域取得重要突破",
            "{uni}团队{field}研究成果登上《{journal}》",
            "{field}新进展！{uni}研究获突破",
        ],
        [
            "{date}，{uni}{person}教授团队在{field}领域取得重要突破，相关成果发表于国际期刊《{journal}》。",
            "记者{date}从{uni}获悉，该校{person}教授团队在{field}研究中取得突破，成果刊登在《{journal}》上。",
        ],
        ["研究团队历时五年完成这项工作。", "该成果有望在{product}等领域得到应用。", "审稿人认为这项研究具有重要意义。"],
        [
            "{uni}{person}教授团队在{field}领域取得重要突破，成果发表于《{journal}》，有望应用于{product}等领域。",
            "{uni}{person}团队的{field}研究成果刊登在《{journal}》上，研究历时五年。",
        ],
        ["uni", "field", "person", "=教授"],
    ),
    _f(
        "科技",
        "5g",
        {"stations": "int:800:60000", "pct": "pct:20:99", "users": "int:50:2000"},
        ["{city}累计建成5G基站{stations}个", "{city}5G基站超{stations}个 覆盖率{pct}%", "{city}5G网络覆盖率达{pct}%"],
        [
            "据{city}市通信管理局{date}消息，全市已累计建成5G基站{stations}个，城区覆盖率达到{pct}%。",
            "{city}市通信管理局{date}发布，{city}累计建成5G基站{stations}个，城区5G覆盖率为{pct}%。",
        ],
        ["全市5G用户已超过{users}万户。", "下一步将推进农村地区网络覆盖。", "5G应用已在工业、医疗等领域落地。"],
        [
            "{city}累计建成5G基站{stations}个，城区覆盖率{pct}%，5G用户超过{users}万户。",
            "{city}市通信管理局称，全市5G基站已达{stations}个，城区覆盖率{pct}%，下一步将推进农村覆盖。",
        ],
        ["city", "=5G基站", "=通信管理局"],
    ),
    # ---------------------------------------------------------------- sports
    _f(
        "体育",
        "match",
        {"team": "team", "team2": "team", "a": "int:2:5", "b": "int:0:1", "round": "int:1:30"},
        ["{team}{a}比{b}战胜{team2}", "联赛第{round}轮：{team}{a}:{b}击败{team2}", "{team}主场{a}比{b}力克{team2}"],
        [
            "{date}晚，联赛第{round}轮一场焦点战在{city}打响，{team}以{a}比{b}战胜{team2}。",
            "在{date}进行的联赛第{round}轮比赛中，{team}主场{a}比{b}击败来访的{team2}。",
        ],
        ["{person}梅开二度，成为全场最佳。", "比赛吸引了两万多名球迷到场观战。", "赛后主教练表示球队发挥了应有水平。"],
        [
            "联赛第{round}轮，{team}以{a}比{b}战胜{team2}，{person}表现出色。",
            "{team}在联赛第{round}轮以{a}比{b}击败{team2}，{person}梅开二度。",
        ],
        ["team", "team2", "=联赛"],
    ),
    _f(
        "体育",
        "champion",
        {"person": "person", "event": "event", "item": "item", "prov": "city"},
        ["{person}夺得{event}{item}冠军", "{event}：{person}摘得{item}金牌", "{person}{item}夺冠"],
        [
            "{date}，{event}在{city}落下帷幕，{prov}选手{person}夺得{item}冠军。",
            "在{date}结束的{event}{item}决赛中，来自{prov}的{person}摘得金牌。",
        ],
        [
            "这是{person}本赛季获得的第二个冠军。",
            "{person}赛后表示将继续努力备战国际大赛。",
            "本次比赛共有来自全国的数百名运动员参赛。",
        ],
        [
            "{prov}选手{person}在{event}中夺得{item}冠军，这是其本赛季第二冠。",
            "{event}{item}决赛中，{prov}的{person}摘得金牌，赛后表示将备战国际大赛。",
        ],
        ["person", "event", "item"],
    ),
    _f(
        "体育",
        "marathon",
        {"runners": "int:5000:40000", "h": "int:2:2", "m": "int:5:20"},
        [
            "{city}马拉松鸣枪开跑 {runners}名选手参赛",
            "{runners}人参赛！{city}马拉松开跑",
            "{city}马拉松举行 冠军成绩{h}小时{m}分",
        ],
        [
            "{date}，{city}马拉松鸣枪开跑，来自国内外的{runners}名选手参加比赛。",
            "{date}上午，{runners}名跑者齐聚{city}，参加{city}马拉松比赛。",
        ],
        ["男子组冠军成绩为{h}小时{m}分。", "赛道沿途设置了多个补给站和医疗点。", "{person}获得女子组冠军。"],
        [
            "{city}马拉松开跑，{runners}名选手参赛，男子组冠军成绩为{h}小时{m}分。",
            "{runners}名跑者参加{city}马拉松，{person}获得女子组冠军。",
        ],
        ["city", "=马拉松", "=比赛"],
    ),
    # --------------------------------------------------------------- weather
    _f(
        "天气",
        "warning",
        {"hazard": "hazard", "color": "color", "mm": "int:30:300", "hours": "int:6:72"},
        [
            "{city}发布{hazard}{color}预警",
            "{city}气象台：未来{hours}小时有{hazard}",
            "{hazard}{color}预警！{city}请注意防范",
        ],
        [
            "{city}市气象台{date}发布{hazard}{color}预警，预计未来{hours}小时全市将出现{hazard}天气。",
            "{date}，{city}市气象台发布{hazard}{color}预警信号，未来{hours}小时{city}有{hazard}天气。",
        ],
        ["局部地区累计降水量可达{mm}毫米。", "气象部门提醒市民减少不必要的外出。", "相关部门已启动应急响应。"],
        [
            "{city}市气象台发布{hazard}{color}预警，未来{hours}小时全市有{hazard}天气，提醒市民减少外出。",
            "{city}发布{hazard}{color}预警，预计未来{hours}小时出现{hazard}，局地降水可达{mm}毫米。",
        ],
        ["city", "hazard", "=气象台", "=预警"],
    ),
    _f(
        "天气",
        "heat",
        {"temp": "int:36:43", "days": "int:3:15"},
        ["{city}最高气温达{temp}℃ 高温持续{days}天", "{city}持续高温 最高{temp}℃", "{temp}℃！{city}迎来高温天气"],
        [
            "{date}，{city}最高气温达到{temp}℃，这已是当地连续第{days}天出现高温天气。",
            "据{city}市气象台消息，{date}{city}最高气温为{temp}℃，高温天气已持续{days}天。",
        ],
        ["用电负荷随之创下新高。", "气象部门提醒户外工作者做好防暑降温。", "预计高温天气还将持续。"],
        [
            "{city}最高气温达{temp}℃，高温已持续{days}天，用电负荷创新高。",
            "{city}连续{days}天出现高温，最高气温{temp}℃，气象部门提醒做好防暑降温。",
        ],
        ["city", "=高温", "=气温"],
    ),
    _f(
        "天气",
        "cold",
        {"drop": "int:8:20", "low": "int:-25:2"},
        ["寒潮来袭 {city}气温骤降{drop}℃", "{city}降温{drop}℃ 最低气温{low}℃", "{city}迎寒潮 最低{low}℃"],
        [
            "受寒潮影响，{date}起{city}气温将下降{drop}℃，最低气温降至{low}℃。",
            "{city}市气象台{date}预报，受寒潮影响{city}将降温{drop}℃，最低气温{low}℃。",
        ],
        ["气象部门提醒市民及时添衣保暖。", "部分路段可能出现道路结冰。", "供暖部门已做好保障准备。"],
        [
            "受寒潮影响，{city}气温下降{drop}℃，最低气温降至{low}℃，提醒市民添衣保暖。",
            "{city}将迎来寒潮，降温{drop}℃，最低气温{low}℃，供暖部门已做好准备。",
        ],
        ["city", "=寒潮", "=最低气温"],
    ),
    # ---------------------------------------------------------------- health
    _f(
        "健康",
        "surgery",
        {"hospital": "hospital", "surgery": "surgery", "person": "person", "age": "int:8:85"},
        ["{hospital}成功完成首例{surgery}", "{hospital}首例{surgery}获成功", "{city}首例！{hospital}完成{surgery}"],
        [
            "记者{date}从{hospital}获悉，该院{person}主任团队成功完成首例{surgery}。",
            "{date}，{hospital}{person}主任团队为一名{age}岁患者实施{surgery}，这是该院首例。",
        ],
        ["患者术后恢复良好。", "这项技术创伤小、恢复快。", "手术历时约四个小时。"],
        [
            "{hospital}{person}主任团队成功完成首例{surgery}，患者术后恢复良好。",
            "{hospital}完成首例{surgery}，由{person}主任团队实施，该技术创伤小、恢复快。",
        ],
        ["hospital", "surgery", "person"],
    ),
    _f(
        "健康",
        "screening",
        {"checkup": "checkup", "people": "int:500:50000", "sites": "int:5:120"},
        [
            "{city}开展免费{checkup} 惠及{people}人",
            "{city}免费{checkup}活动启动",
            "{people}人受益！{city}开展{checkup}",
        ],
        [
            "{date}，{city}市卫生健康委员会启动免费{checkup}活动，预计惠及居民{people}人。",
            "{city}市卫生健康委员会{date}宣布，将为{people}名居民提供免费{checkup}。",
        ],
        ["全市共设置{sites}个服务点。", "活动将持续至年底。", "居民可通过社区预约参加。"],
        [
            "{city}启动免费{checkup}活动，设{sites}个服务点，预计惠及{people}名居民。",
            "{city}市卫生健康委员会为{people}名居民提供免费{checkup}，活动持续至年底。",
        ],
        ["city", "checkup", "=卫生健康委员会"],
    ),
    _f(
        "健康",
        "disease",
        {"disease": "disease", "cases": "int:20:3000", "pct": "pct:5:60"},
        [
            "{city}{disease}病例增加 专家提醒做好防护",
            "{city}进入{disease}高发期",
            "{city}一周报告{disease}病例{cases}例",
        ],
        [
            "{city}市疾病预防控制中心{date}通报，近一周全市报告{disease}病例{cases}例，环比上升{pct}%。",
            "据{city}市疾病预防控制中心{date}消息，{city}一周内报告{disease}{cases}例，比上周增加{pct}%。",
        ],
        ["专家提醒市民勤洗手、常通风。", "学校和托幼机构是防控重点。", "出现症状应及时就医。"],
        [
            "{city}近一周报告{disease}病例{cases}例，环比上升{pct}%，专家提醒勤洗手、常通风。",
            "{city}疾控中心通报一周{disease}病例{cases}例，增加{pct}%，学校是防控重点。",
        ],
        ["city", "disease", "=疾病预防控制中心"],
    ),
    # ------------------------------------------------------------- education
    _f(
        "教育",
        "enrollment",
        {"uni": "uni", "quota": "int:2000:12000", "subject": "subject", "new": "int:2:8"},
        ["{uni}今年计划招生{quota}人", "{uni}新增{subject}等{new}个专业", "{uni}公布招生计划 新增{subject}专业"],
        [
            "{date}，{uni}公布今年本科招生计划，计划招生{quota}人，新增{subject}等{new}个专业。",
            "{uni}{date}发布招生计划，今年本科计划招收{quota}人，并新设{subject}等{new}个专业。",
        ],
        ["学校还将扩大专项计划招生规模。", "新专业将于秋季学期开始招生。", "招生办负责人{person}介绍了具体政策。"],
        [
            "{uni}今年本科计划招生{quota}人，新增{subject}等{new}个专业。",
            "{uni}公布招生计划，本科招收{quota}人，新设{subject}等{new}个专业，秋季开始招生。",
        ],
        ["uni", "subject", "=招生"],
    ),
    _f(
        "教育",
        "schools",
        {"n": "int:3:40", "seats": "int:2000:60000"},
        ["{city}新建{n}所学校 新增学位{seats}个", "{city}今秋{n}所新校开学", "新增学位{seats}个！{city}新学校投用"],
        [
            "{date}，{city}市教育局介绍，今年全市新建中小学{n}所，新增学位{seats}个。",
            "{city}市教育局{date}发布，今秋{city}有{n}所新建中小学投入使用，新增学位{seats}个。",
        ],
        ["新学校均配备了现代化教学设施。", "这将有效缓解城区入学压力。", "教育部门同步招聘了一批新教师。"],
        [
            "{city}今年新建中小学{n}所，新增学位{seats}个，缓解了城区入学压力。",
            "{city}有{n}所新建中小学投入使用，新增学位{seats}个，配备现代化教学设施。",
        ],
        ["city", "=教育局", "=学位"],
    ),
    _f(
        "教育",
        "scholarship",
        {"uni": "uni", "amount": "int:200:5000", "students": "int:300:9000"},
        [
            "{uni}发放奖助学金{amount}万元",
            "{students}名学生受益！{uni}发放奖助学金",
            "{uni}奖助学金覆盖{students}名学生",
        ],
        [
            "{date}，{uni}举行奖助学金发放仪式，共发放奖助学金{amount}万元，惠及学生{students}名。",
            "{uni}{date}宣布，本学年共向{students}名学生发放奖助学金{amount}万元。",
        ],
        ["资助对象以家庭经济困难学生为主。", "部分资金来自校友捐赠。", "学校还设立了勤工助学岗位。"],
        [
            "{uni}发放奖助学金{amount}万元，惠及{students}名学生，以家庭经济困难学生为主。",
            "{uni}本学年向{students}名学生发放奖助学金共{amount}万元，部分来自校友捐赠。",
        ],
        ["uni", "=奖助学金", "=学生"],
    ),
    # -------------------------------------------------------------- transport
    _f(
        "交通",
        "metro",
        {"line": "int:1:20", "km": "dec:10:60", "stations": "int:10:40"},
        [
            "{city}地铁{line}号线开通运营",
            "{city}地铁{line}号线开通 全长{km}公里",
            "全长{km}公里！{city}地铁{line}号线通车",
        ],
        [
            "{date}，{city}地铁{line}号线正式开通运营，线路全长{km}公里，共设车站{stations}座。",
            "{city}地铁{line}号线{date}开通初期运营，全长{km}公里，设站{stations}座。",
        ],
        ["开通首日客流超过十万人次。", "该线路连接了多个重要商圈。", "首班车发车时间为早上六点。"],
        [
            "{city}地铁{line}号线开通运营，全长{km}公里，设站{stations}座。",
            "{city}地铁{line}号线正式开通，线路长{km}公里，共{stations}座车站，连接多个商圈。",
        ],
        ["city", "=地铁", "=开通"],
    ),
    _f(
        "交通",
        "railway",
        {"city2": "city", "kmh": "int:250:350", "minutes": "int:40:240"},
        ["{city}至{city2}高铁开通", "{city}到{city2}最快{minutes}分钟", "{city}至{city2}高铁正式通车 时速{kmh}公里"],
        [
            "{date}，{city}至{city2}高速铁路正式开通运营，设计时速{kmh}公里。",
            "{city}至{city2}高铁{date}开通运营，设计时速{kmh}公里。",
        ],
        ["两地间最快旅行时间缩短至{minutes}分钟。", "沿线设有多个车站。", "铁路部门将根据客流增开列车。"],
        [
            "{city}至{city2}高铁开通运营，设计时速{kmh}公里，最快{minutes}分钟可达。",
            "{city}至{city2}高速铁路正式开通，时速{kmh}公里，两地最快旅行时间缩短至{minutes}分钟。",
        ],
        ["city", "city2", "=开通运营"],
    ),
    _f(
        "交通",
        "airport",
        {"pax": "int:100:8000", "pct": "pct:2:60", "months": "int:2:11"},
        [
            "{city}机场前{months}月旅客吞吐量{pax}万人次",
            "{city}机场客流同比增长{pct}%",
            "{city}机场旅客吞吐量增长{pct}%",
        ],
        [
            "据{city}机场{date}消息，今年前{months}个月机场旅客吞吐量达{pax}万人次，同比增长{pct}%。",
            "{city}机场{date}发布，前{months}个月完成旅客吞吐量{pax}万人次，同比增长{pct}%。",
        ],
        ["国际航线客流恢复明显。", "机场新开通了多条国内航线。", "暑运期间客流将继续增长。"],
        [
            "{city}机场前{months}个月旅客吞吐量{pax}万人次，同比增长{pct}%，国际航线客流恢复明显。",
            "{city}机场前{months}个月完成旅客吞吐量{pax}万人次，增长{pct}%，新开多条国内航线。",
        ],
        ["city", "=机场", "=旅客吞吐量"],
    ),
    # --------------------------------------------------------------- culture
    _f(
        "文化",
        "exhibition",
        {"museum": "museum", "exhibit": "exhibit", "pieces": "int:50:600", "days": "int:30:180"},
        ["{museum}推出{exhibit}特展", "{pieces}件展品亮相！{museum}{exhibit}特展开幕", "{exhibit}特展在{museum}开幕"],
        [
            "{date}，{exhibit}特展在{museum}开幕，共展出相关展品{pieces}件。",
            "{museum}{date}推出{exhibit}特展，{pieces}件展品集中亮相。",
        ],
        ["展览将持续{days}天。", "其中多件展品为首次公开展出。", "展览实行免费预约参观。"],
        [
            "{exhibit}特展在{museum}开幕，展出展品{pieces}件，展期{days}天。",
            "{museum}推出{exhibit}特展，{pieces}件展品亮相，多件为首次公开展出。",
        ],
        ["museum", "exhibit", "=特展"],
    ),
    _f(
        "文化",
        "boxoffice",
        {"film": "film", "days": "int:3:40", "box": "dec:1:50"},
        ["电影《{film}》票房突破{box}亿元", "《{film}》上映{days}天票房破{box}亿", "{box}亿！《{film}》票房创新高"],
        [
            "据猫眼专业版数据，截至{date}，电影《{film}》上映{days}天，累计票房突破{box}亿元。",
            "电影《{film}》上映第{days}天，截至{date}累计票房已突破{box}亿元。",
        ],
        ["影片由{person}执导。", "该片在各大平台评分均超过八分。", "片方表示将延长上映时间。"],
        [
            "电影《{film}》上映{days}天累计票房突破{box}亿元，影片由{person}执导。",
            "《{film}》上映{days}天票房破{box}亿元，各平台评分超过八分。",
        ],
        ["film", "=票房", "=上映"],
    ),
    _f(
        "文化",
        "festival",
        {"festival": "festival", "visitors": "int:2:300", "days": "int:3:15"},
        ["{city}{festival}开幕", "{city}{festival}吸引游客{visitors}万人次", "{city}{festival}启幕 为期{days}天"],
        [
            "{date}，{city}{festival}开幕，活动为期{days}天，预计吸引游客{visitors}万人次。",
            "为期{days}天的{city}{festival}于{date}开幕，主办方预计接待游客{visitors}万人次。",
        ],
        ["活动期间将举办数十场演出。", "周边酒店预订量明显上升。", "主办方增设了公交专线。"],
        [
            "{city}{festival}开幕，为期{days}天，预计吸引游客{visitors}万人次。",
            "{city}{festival}举行，为期{days}天，预计接待{visitors}万人次，周边酒店预订上升。",
        ],
        ["city", "festival", "=开幕"],
    ),
    # ----------------------------------------------------------- agriculture
    _f(
        "农业",
        "harvest",
        {"crop": "crop", "yield": "int:300:900", "mu": "int:5:500", "pct": "pct:2:20"},
        ["{city}{crop}喜获丰收 亩产{yield}公斤", "{city}{mu}万亩{crop}丰收", "亩产{yield}公斤！{city}{crop}迎丰收"],
        [
            "{date}，{city}{mu}万亩{crop}陆续收获，平均亩产{yield}公斤，同比增长{pct}%。",
            "记者{date}从{city}市农业农村局获悉，全市{mu}万亩{crop}喜获丰收，亩产达{yield}公斤。",
        ],
        ["今年推广了多个优良品种。", "机械化收割率超过九成。", "农技人员深入田间开展指导。"],
        [
            "{city}{mu}万亩{crop}丰收，平均亩产{yield}公斤，优良品种得到推广。",
            "{city}{crop}喜获丰收，种植面积{mu}万亩，亩产{yield}公斤，机收率超过九成。",
        ],
        ["city", "crop", "=亩产"],
    ),
    _f(
        "农业",
        "ecommerce",
        {"crop": "crop", "sales": "int:1:90", "pct": "pct:10:150"},
        [
            "{city}{crop}网上销售额{sales}亿元",
            "{city}{crop}搭上电商快车 销售额增{pct}%",
            "直播带货！{city}{crop}销量增长{pct}%",
        ],
        [
            "据{city}市商务局{date}消息，今年以来{city}{crop}网络零售额达{sales}亿元，同比增长{pct}%。",
            "{city}市商务局{date}介绍，通过直播电商，{city}{crop}网络零售额{sales}亿元，增长{pct}%。",
        ],
        ["当地培训了一批农民主播。", "冷链物流体系不断完善。", "产品远销全国各地。"],
        [
            "{city}{crop}网络零售额达{sales}亿元，同比增长{pct}%，当地培训了一批农民主播。",
            "借助直播电商，{city}{crop}网络零售额{sales}亿元，增长{pct}%，冷链物流不断完善。",
        ],
        ["city", "crop", "=商务局", "=网络零售额"],
    ),
    # ------------------------------------------------------------------- law
    _f(
        "法治",
        "police",
        {"crime": "crime", "suspects": "int:3:200", "amount": "int:100:9000"},
        [
            "{city}警方破获{crime}案 抓获{suspects}人",
            "{city}破获特大{crime}案",
            "涉案{amount}万元！{city}警方侦破{crime}案",
        ],
        [
            "{date}，{city}市公安局通报，成功破获一起{crime}案，抓获犯罪嫌疑人{suspects}名，涉案金额{amount}万元。",
            "{city}市公安局{date}发布消息，警方侦破一起特大{crime}案，抓获嫌疑人{suspects}名，涉案{amount}万元。",
        ],
        ["目前案件正在进一步审理中。", "警方提醒群众提高防范意识。", "该团伙作案时间长达两年。"],
        [
            "{city}警方破获一起{crime}案，抓获犯罪嫌疑人{suspects}名，涉案金额{amount}万元。",
            "{city}市公安局侦破特大{crime}案，抓获{suspects}名嫌疑人，涉案{amount}万元。",
        ],
        ["city", "crime", "=公安局"],
    ),
    _f(
        "法治",
        "court",
        {"case": "case", "company": "company", "comp": "int:10:5000"},
        ["{city}中院审结一起{case}案", "{company}{case}案一审宣判", "{city}法院判赔{comp}万元"],
        [
            "{date}，{city}市中级人民法院对一起涉及{company}的{case}案作出一审判决，判令被告赔偿{comp}万元。",
            "{city}市中级人民法院{date}公开宣判{company}{case}案，一审判决赔偿{comp}万元。",
        ],
        ["法院审理认为，被告行为已构成侵权。", "双方均表示将考虑是否上诉。", "该案被列为当地典型案例。"],
        [
            "{city}市中级人民法院一审判决{company}{case}案，判令赔偿{comp}万元。",
            "{city}中院审结{company}{case}案，一审判赔{comp}万元，该案被列为典型案例。",
        ],
        ["city", "company", "case", "=中级人民法院"],
    ),
    # ----------------------------------------------------------- environment
    _f(
        "环境",
        "air",
        {"days": "int:150:340", "pm": "int:15:60", "pct": "pct:1:20"},
        ["{city}空气优良天数达{days}天", "{city}PM2.5浓度下降{pct}%", "{city}空气质量持续改善"],
        [
            "{city}市生态环境局{date}发布，今年以来全市空气质量优良天数达{days}天，PM2.5平均浓度为{pm}微克每立方米。",
            "据{city}市生态环境局{date}消息，{city}空气质量优良天数为{days}天，PM2.5浓度{pm}微克每立方米。",
        ],
        ["PM2.5浓度同比下降{pct}%。", "全市持续推进工业污染治理。", "新能源公交车占比不断提高。"],
        [
            "{city}今年空气质量优良天数达{days}天，PM2.5平均浓度{pm}微克每立方米，同比下降{pct}%。",
            "{city}空气优良天数{days}天，PM2.5浓度为{pm}微克每立方米，工业污染治理持续推进。",
        ],
        ["city", "=生态环境局", "=空气质量"],
    ),
    _f(
        "环境",
        "trees",
        {"tree": "tree", "trees": "int:1:300", "people": "int:500:20000"},
        ["{city}义务植树{trees}万株", "{people}名市民参与！{city}开展义务植树", "{city}植树活动种下{tree}{trees}万株"],
        [
            "{date}，{city}开展全民义务植树活动，{people}名市民参与，共种植{tree}等树木{trees}万株。",
            "{city}{date}举行义务植树活动，{people}名志愿者共栽种{tree}等苗木{trees}万株。",
        ],
        ["全市森林覆盖率进一步提高。", "林业部门将做好后期养护。", "活动吸引了许多家庭参加。"],
        [
            "{city}开展义务植树活动，{people}名市民种植{tree}等树木{trees}万株。",
            "{city}举行义务植树，{people}名志愿者栽种{tree}等苗木{trees}万株，森林覆盖率提高。",
        ],
        ["city", "tree", "=植树"],
    ),
)
